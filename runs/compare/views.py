"""The comparison page: runs against a baseline, and the paired items."""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse, HttpResponseBase
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET

from runs.analysis import compare as analysis
from runs.analysis.compare import Comparison
from runs.analysis.step_compare import step_comparisons
from runs.compare import selectors
from runs.compare.selectors import (
    compare_url,
    comparison_pair,
    run_comparison,
    run_ids_parse,
)
from runs.errors import InvalidInput
from runs.records import page_state, pagecache
from runs.results.downloads import comparison_csv_response
from runs.results.selectors import run_get
from runs.review.calibration import uncalibrated_judges
from runs.web.pages import page_of
from runs.web.requests import AuthedRequest

ITEMS_PER_PAGE = 50
CHANGE_LABELS = {
    "": "All paired items",
    "regressions": "Regressions",
    "improvements": "Improvements",
    "both_failed": "Both failed",
    "output_changed": "Output changed",
}


@require_GET
def compare(request: AuthedRequest) -> HttpResponse:
    try:
        if "run" in request.GET:  # ticked in the runs list or on a run's page
            return redirect(_ticked_url(request))

        def state() -> tuple[Any, ...] | None:
            return _runs_state(request)

        # From the cache while nothing it shows has moved: the page shows the
        # runs' rows, and what it computes (verdicts, items, steps, the
        # judges' calibration) comes from their results, which their rows'
        # versions key (page_state.run_page_key; a going run's by the second).
        return pagecache.render_current(
            request,
            "runs/compare/compare.html",
            lambda: (_comparison_context(request), 200),
            state=state,
        )
    except InvalidInput as exc:
        return render(request, "runs/compare/compare.html", {"error": exc}, status=400)


def _runs_state(request: AuthedRequest) -> tuple[Any, ...] | None:
    """Each compared run's page state for this user; None (not cached) when
    one of them is not the user's to see, or is being re-scored."""
    ids = [
        *run_ids_parse(request.GET.get("baseline"), field="baseline"),
        *run_ids_parse(request.GET.get("candidates"), field="candidates"),
    ]
    states = tuple(
        page_state.run_page_key(user_id=request.user.pk, run_id=run_id)
        for run_id in ids
    )
    return None if any(state is None for state in states) else states


def _ticked_url(request: AuthedRequest) -> str:
    """The comparison of the ticked runs: the given baseline, else the oldest."""
    ticked = run_ids_parse(",".join(request.GET.getlist("run")), field="run")
    baseline = request.GET.get("baseline")
    if baseline:
        baseline_id = run_ids_parse(baseline, field="baseline")[0]
    else:
        baseline_id = min(ticked)
    candidates = list(dict.fromkeys(i for i in ticked if i != baseline_id))
    if not candidates:
        raise InvalidInput("tick two or more runs to compare", field="run")
    return compare_url(baseline_id, candidates)


def _comparison_context(request: AuthedRequest) -> dict[str, Any]:
    baseline_ids = run_ids_parse(request.GET.get("baseline"), field="baseline")
    if len(baseline_ids) != 1:
        raise InvalidInput("give one baseline run", field="baseline")
    comparison = run_comparison(
        user=request.user,
        baseline_id=baseline_ids[0],
        candidate_ids=run_ids_parse(request.GET.get("candidates"), field="candidates"),
    )
    runs = [comparison.baseline, *comparison.candidates]
    chosen = request.GET.get("candidate", "")
    candidate = next(
        (run for run in comparison.candidates if str(run.pk) == chosen),
        comparison.candidates[0],
    )
    scorers = analysis.shared_scorers(comparison.baseline, candidate)
    scorer = request.GET.get("scorer", "")
    scorer = scorer if scorer in scorers else (scorers[0] if scorers else "")
    change = request.GET.get("change", "")
    items = page = None
    if scorer:
        row = next(
            r
            for r in comparison.scorers
            if r.candidate == candidate.pk and r.scorer == scorer
        )
        items = analysis.ComparisonItems(
            baseline=comparison.baseline,
            candidate=candidate,
            scorer=scorer,
            paired_by=comparison.paired_by,
            change=change,
            count=analysis.item_count(row, change),
        )
        page = page_of(request, items, ITEMS_PER_PAGE)
    return {
        **_plan_context(request, comparison, candidate.pk, scorer),
        "comparison": comparison,
        "baselines": [
            (run, compare_url(run.pk, [r.pk for r in runs if r.pk != run.pk]))
            for run in runs
        ],
        "candidate": candidate,
        "scorers": scorers,
        "scorer": scorer,
        "change": change,
        "changes": CHANGE_LABELS.items(),
        "page": page,
        "alpha": analysis.ALPHA,
        "resamples": analysis.RESAMPLES,
        "exact_sign_vectors": analysis.EXACT_SIGN_VECTORS,
        "step_comparisons": step_comparisons(
            comparison.baseline, comparison.candidates
        ),
        "normal_effective_items": analysis.NORMAL_EFFECTIVE_ITEMS,
        "judge_notes": uncalibrated_judges(
            [*comparison.candidates, comparison.baseline],
            [row.scorer for row in comparison.scorers],
        ),
    }


def _plan_context(
    request: AuthedRequest, comparison: Comparison, candidate: int, scorer: str
) -> dict[str, Any]:
    """The planner's section: its plan for the row shown, or why there is none."""
    try:
        plan = selectors.comparison_plan(
            comparison=comparison,
            candidate=candidate,
            scorer=scorer,
            asked=selectors.plan_asked_parse(request.GET),
        )
    except InvalidInput as exc:
        return {"plan": None, "plan_error": exc}
    return {"plan": plan, "plan_error": None}


@require_GET
def run_compare_choices(request: AuthedRequest, run_id: int) -> HttpResponse:
    """Runs over the same dataset to compare a run with (a fragment for htmx)."""
    run = run_get(user=request.user, run_id=run_id)
    context = {
        "run": run,
        "choices": selectors.run_compare_choices(user=request.user, run=run),
    }
    if request.headers.get("HX-Request"):
        return render(request, "runs/compare/_run_compare_choices.html", context)
    return render(request, "runs/compare/run_compare_choices.html", context)


@require_GET
def compare_items_csv(request: AuthedRequest) -> HttpResponseBase:
    """Every paired item of one (candidate, scorer), as on the page, as CSV.

    A bad parameter is a 400 page naming it, as on the comparison page.
    """
    try:
        scorer = request.GET.get("scorer", "")
        baseline, candidate = comparison_pair(
            user=request.user,
            baseline_id=_one_run_id(request, "baseline"),
            candidate_id=_one_run_id(request, "candidate"),
            scorer=scorer,
        )
        return comparison_csv_response(
            baseline=baseline,
            candidate=candidate,
            scorer=scorer,
            change=request.GET.get("change") or None,
        )
    except InvalidInput as exc:
        return render(request, "runs/compare/compare.html", {"error": exc}, status=400)


def _one_run_id(request: AuthedRequest, field: str) -> int:
    ids = run_ids_parse(request.GET.get(field), field=field)
    if len(ids) != 1:
        raise InvalidInput("give one run id", field=field)
    return ids[0]
