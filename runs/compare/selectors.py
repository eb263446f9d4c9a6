"""Reads for comparing runs: the runs asked for, their comparison, the choices."""

from __future__ import annotations

from django.contrib.auth.models import User

from runs.analysis.compare import Comparison, compare_runs_cached
from runs.analysis.compare import shared_scorers as compare_shared_scorers
from runs.errors import InvalidInput
from runs.models import Run
from runs.results.selectors import run_get, run_list

MAX_COMPARED_CANDIDATES = 10


def run_ids_parse(text: str | None, *, field: str) -> list[int]:
    """Run ids from ``1,2,3``; InvalidInput naming ``field`` if that is not it."""
    parts = [part.strip() for part in (text or "").split(",") if part.strip()]
    if not parts:
        raise InvalidInput("give one or more run ids, separated by commas", field=field)
    if len(parts) > MAX_COMPARED_CANDIDATES:
        raise InvalidInput(
            f"at most {MAX_COMPARED_CANDIDATES} runs at once", field=field
        )
    ids = []
    for part in parts:
        if not (part.isascii() and part.isdigit() and len(part) <= 19):
            raise InvalidInput(f"{part!r} is not a run id", field=field)
        number = int(part)
        if not 1 <= number <= 2**63 - 1:
            raise InvalidInput(f"{part!r} is not a run id", field=field)
        ids.append(number)
    return ids


def run_comparison(
    *, user: User, baseline_id: int, candidate_ids: list[int]
) -> Comparison:
    """The baseline against each candidate; every run must be the user's to see."""
    baseline = run_get(user=user, run_id=baseline_id)
    candidates = [run_get(user=user, run_id=run_id) for run_id in candidate_ids]
    return compare_runs_cached(baseline=baseline, candidates=candidates)


def comparison_pair(
    *, user: User, baseline_id: int, candidate_id: int, scorer: str
) -> tuple[Run, Run]:
    """Two runs the user may see that share ``scorer``: one comparison's items."""
    baseline = run_get(user=user, run_id=baseline_id)
    candidate = run_get(user=user, run_id=candidate_id)
    shared = compare_shared_scorers(baseline, candidate)
    if scorer not in shared:
        raise InvalidInput(
            f"must be a scorer of both runs ({', '.join(shared) or 'none'}), "
            f"not {scorer!r}",
            field="scorer",
        )
    return baseline, candidate


def run_compare_choices(*, user: User, run: Run, limit: int = 20) -> list[Run]:
    """Other runs over the run's dataset (any version), newest first."""
    return list(
        run_list(user=user, project_id=run.project_id)
        .filter(dataset__name=run.dataset.name)
        .exclude(pk=run.pk)
        .only(
            "name",
            "status",
            "target_name",
            "created_at",
            "project",
            "dataset",
            "dataset__name",
            "dataset__version",
            "project__name",
        )
        .order_by("-created_at", "-id")[:limit]
    )
