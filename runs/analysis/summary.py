"""How good a run was: per-scorer pass rates with their intervals and pass@k,
latency percentiles, tokens, cost and counts, aggregated in the database (the
latencies read as arrays: timings.py).

Definition used everywhere: a result whose target call failed or timed out, or
whose score errored, counts as not passed for that scorer (it is what the user
got). A score skipped by its condition (``when``) is neither passed nor failed:
it leaves the denominator; so does a result stopped in flight (its call was cut
short by the run's stop: a cancel, fail fast, the deadline, the cost budget),
which is no sample of the target. A scorer's pass rate is passed / (results -
skipped - stopped), over every stored result of every epoch; its mean is over
the scores that have a value.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.db.models import (
    Avg,
    Count,
    Max,
    Min,
    Model,
    Q,
    Sum,
)
from django.utils import timezone

from runs.analysis import stats
from runs.analysis.steps import StepSummary, step_summary
from runs.analysis.timings import Timings, read_timings
from runs.models import (
    ATTEMPTS_MADE,
    DEADLINE_ERROR_TYPE,
    STOPPED_IN_FLIGHT,
    ErrorKind,
    Result,
    ResultStatus,
    Run,
    Score,
)
from runs.records import cache_keys, single_flight
from runs.records.tallies import tallied_figures

CACHE_SECONDS = 600
# A finished run's results change only by what changes its results_version
# (a retry, a re-score): its figures may stay cached much longer.
FINAL_CACHE_SECONDS = 24 * 3600

# STOPPED_IN_FLIGHT in hand SQL over a result ``r``, and its values in order.
STOPPED_SQL = "r.status = %s OR (r.status = %s AND r.error_type = %s)"
STOPPED_PARAMS = (
    ResultStatus.CANCELLED.value,
    ResultStatus.TIMED_OUT.value,
    DEADLINE_ERROR_TYPE,
)

PASS_RATE_DEFINITION = (
    "A result whose target call failed or timed out on its own timeout, or "
    "whose score errored, counts as not passed: the pass rate is passed / "
    "results, over every stored result of every epoch. A score skipped by its "
    "condition (a scorer that runs only when another passed or failed) is "
    "neither, nor is a result stopped in flight (its call cut short because "
    "the run stopped: a cancel, fail fast, the deadline or the cost budget): "
    "both leave the denominator, which is results - skipped - stopped. The "
    "mean is over the scores that have a value."
)


@dataclass(frozen=True, slots=True)
class ScorerSummary:
    scorer: str
    results: int  # every stored result of the run, all epochs
    scored: int  # the score has a value
    errored: int  # the scorer raised or timed out
    not_scored: int  # the target call failed: no score at all
    passed: int
    mean: float | None
    low: float | None  # the lowest and highest score values
    high: float | None
    pass_rate: float | None
    pass_rate_ci: tuple[float, float] | None
    # stats.WILSON with one epoch, stats.CLUSTERED (by item) with several.
    pass_rate_ci_method: str = stats.WILSON
    # k -> mean over items of the estimator; only with several epochs.
    pass_at_k: dict[int, float | None] = field(default_factory=dict)
    pass_hat_k: dict[int, float | None] = field(default_factory=dict)
    skipped: int = 0  # the scorer's condition did not hold: not in the denominator
    # Results whose call the run's stop cut short: no sample, not in it either.
    stopped: int = 0
    # What a judge used, over the run's scores (None when none reports it).
    prompt_tokens: int | None = None
    completion_tokens: int | None = None

    @property
    def judged(self) -> int:
        """The pass rate's denominator: results whose score was not skipped,
        and that were not stopped in flight."""
        return self.results - self.skipped - self.stopped

    @property
    def failed(self) -> int:
        """Results not passed (nor skipped nor stopped), whatever the reason."""
        return self.judged - self.passed


@dataclass(frozen=True, slots=True)
class RunSummary:
    run: int
    status: str
    epochs: int
    counts: dict[str, int]
    scorers: list[ScorerSummary]
    latency_ms: dict[str, float | None]
    latency_count: int  # succeeded results with a latency
    tokens: dict[str, int]
    cost: float | None  # None when no result has a cost
    error_kinds: dict[str, int]
    retried: int  # results that needed more than one attempt
    last_finished_at: datetime | None
    # Models whose tokens have no price: their results' cost is unknown.
    unpriced_models: list[str] = field(default_factory=list)
    # From the first attempt's start to the last one's end, failed attempts
    # and back-off included, over the same succeeded results as latency_ms
    # (which is the last attempt's only).
    time_to_result_ms: dict[str, float | None] = field(default_factory=dict)
    time_to_result_count: int = 0
    # Attempts that failed, retried or not (a result that failed counts its
    # last attempt too), in all and per error kind, most first.
    failed_attempts: int = 0
    attempt_error_kinds: dict[str, int] = field(default_factory=dict)
    # Steps and tool calls, when results of the run have trajectories.
    steps: StepSummary | None = None

    @property
    def has_pass_at_k(self) -> bool:
        return self.epochs > 1

    @property
    def pass_rate_ci_label(self) -> str:
        """How the pass rates' intervals were computed, for the page."""
        method = self.scorers[0].pass_rate_ci_method if self.scorers else stats.WILSON
        return stats.INTERVAL_LABELS.get(method, method)

    @property
    def ks(self) -> list[int]:
        """The k of pass@k and pass^k: 1, 2, 4, ... up to the epochs."""
        return stats.k_values(self.epochs) if self.has_pass_at_k else []


def scorer_names(run: Run, found: set[str] | None = None) -> list[str]:
    """The run's scorers in its order, then any other name its scores carry."""
    names = run.scorer_names
    return names + sorted((found or set()) - set(names))


def _score_rows(run: Run) -> dict[str, Mapping[str, Any]]:
    return {
        row["scorer"]: row
        for row in Score.objects.filter(result__run=run)
        .values("scorer")
        .annotate(
            rows=Count("id"),
            mean=Avg("value"),
            low=Min("value"),
            high=Max("value"),
            scored=Count("id", filter=Q(value__isnull=False)),
            passed=Count("id", filter=Q(passed=True)),
            errored=Count("id", filter=~Q(error="")),
            skipped=Count("id", filter=Q(skipped=True)),
            prompt_tokens=Sum("prompt_tokens"),
            completion_tokens=Sum("completion_tokens"),
        )
        .order_by()
    }


def _scorer_summaries(
    run: Run,
    rows: Mapping[str, Mapping[str, Any]],
    *,
    results: int,
    stopped: int,
    ks: list[int],
) -> list[ScorerSummary]:
    """Per scorer, from its score ``rows`` (``_score_rows``) and the run's
    results counted AFTER them. A run still going stores results with their
    scores in one transaction, so results counted later are at least those
    the scores belong to: never more passes than trials (a pass rate over 1,
    an interval of a negative variance), as when the results were counted
    first and a batch was stored in between."""
    epochs = run.epochs
    summaries = []
    for name in scorer_names(run, set(rows)):
        row = rows.get(name, {})
        passed = row.get("passed", 0)
        skipped = row.get("skipped", 0)
        judged = results - skipped - stopped
        groups = _pass_groups(run, name) if epochs > 1 else []
        interval, method = _pass_rate_interval(passed, judged, epochs, groups)
        summaries.append(
            ScorerSummary(
                scorer=name,
                results=results,
                scored=row.get("scored", 0),
                errored=row.get("errored", 0),
                not_scored=max(results - row.get("rows", 0), 0),
                passed=passed,
                mean=row.get("mean"),
                low=row.get("low"),
                high=row.get("high"),
                pass_rate=passed / judged if judged > 0 else None,
                pass_rate_ci=interval,
                pass_rate_ci_method=method,
                pass_at_k={
                    k: stats.mean_over_items(groups, k, "pass_at_k") for k in ks
                },
                pass_hat_k={
                    k: stats.mean_over_items(groups, k, "pass_hat_k") for k in ks
                },
                skipped=skipped,
                stopped=stopped,
                prompt_tokens=row.get("prompt_tokens"),
                completion_tokens=row.get("completion_tokens"),
            )
        )
    return summaries


def _pass_rate_interval(
    passed: int, judged: int, epochs: int, groups: list[tuple[int, int, int]]
) -> tuple[tuple[float, float] | None, str]:
    """The pass rate's 95% interval and how it was computed: Wilson's with one
    epoch; with several, clustered by item, the epochs of an item being no
    independent trials (``stats.clustered_interval``)."""
    if epochs > 1:
        return stats.clustered_interval(passed, judged, groups), stats.CLUSTERED
    return stats.wilson_interval(passed, judged), stats.WILSON


def _pass_groups(run: Run, scorer: str) -> list[tuple[int, int, int]]:
    """(n results, c passes, how many items) for one scorer.

    Counted per item, then grouped by (n, c) in the database: a handful of
    rows whatever the size of the run. A result whose score was skipped, or
    that was stopped in flight, is not a trial: it is left out of n.
    """
    result_table = Result._meta.db_table
    score_table = Score._meta.db_table
    sql = f"""
        SELECT per_item.n, per_item.c, COUNT(*)
        FROM (
            SELECT r.item_index, COUNT(*) AS n, COUNT(s.id) AS c
            FROM {result_table} r
            LEFT JOIN {score_table} s
              ON s.result_id = r.id AND s.scorer = %s AND s.passed = %s
            WHERE r.run_id = %s
              AND NOT ({STOPPED_SQL})
              AND NOT EXISTS (
                SELECT 1 FROM {score_table} k
                WHERE k.result_id = r.id AND k.scorer = %s AND k.skipped = %s
            )
            GROUP BY r.item_index
        ) per_item
        GROUP BY per_item.n, per_item.c
    """  # table names from the models, values as parameters
    with connection.cursor() as cursor:
        cursor.execute(sql, [scorer, True, run.pk, *STOPPED_PARAMS, scorer, True])
        return [(int(n), int(c), int(items)) for n, c, items in cursor.fetchall()]


def attempt_error_kinds(run: Run) -> dict[str, int]:
    """Failed attempts per error kind, most first, read in the database from
    the attempt logs of the results that have failed attempts only."""
    table = Result._meta.db_table
    if connection.vendor == "postgresql":
        elements = "jsonb_array_elements(r.attempts) AS e(value)"
        kind = "e.value ->> 'error_kind'"
    else:
        elements = "json_each(r.attempts) AS e"
        kind = "json_extract(e.value, '$.error_kind')"
    sql = f"""
        SELECT {kind} AS kind, COUNT(*)
        FROM {table} r, {elements}
        WHERE r.run_id = %s AND r.failed_attempts > 0
          AND COALESCE({kind}, '') <> ''
        GROUP BY kind
    """  # the table name from the model, values as parameters
    with connection.cursor() as cursor:
        cursor.execute(sql, [run.pk])
        found = [(str(kind), int(n)) for kind, n in cursor.fetchall()]
    return dict(sorted(found, key=_most_first))


def run_summary(*, run: Run, timings: Timings | None = None) -> RunSummary:
    """Every figure of the run summary, from a few aggregate queries;
    ``timings``, the succeeded results' latencies and times to result read
    already (a run's end reads them with its result table), spare it a read."""
    score_rows = _score_rows(run)  # before the results: see _scorer_summaries
    if timings is None:
        # Before the counts: a result stored meanwhile is counted, and no
        # latency is of a result the counts have not seen.
        timings = read_timings(run)
    totals = _totals(run)
    results = totals["results"]
    failed = totals["failed_attempts"]
    processed = sum(totals[status.value] for status in ResultStatus)
    remainder = max(run.total - processed, 0)
    counts = {
        "total": run.total,
        **{status.value: totals[status.value] for status in ResultStatus},
        "skipped": remainder if run.is_final else 0,
        "pending": 0 if run.is_final else remainder,
        "processed": processed,
    }
    kinds = ((kind.value, totals[f"kind_{kind.value}"]) for kind in ErrorKind)
    error_kinds = dict(sorted((kind for kind in kinds if kind[1]), key=_most_first))
    epochs = run.epochs
    ks = stats.k_values(epochs) if epochs > 1 else []
    return RunSummary(
        run=run.pk,
        status=run.status,
        epochs=epochs,
        counts=counts,
        scorers=_scorer_summaries(
            run, score_rows, results=results, stopped=totals["stopped"], ks=ks
        ),
        latency_ms=timings.latency_figures(),
        latency_count=len(timings.latencies),
        time_to_result_ms=timings.time_figures(),
        time_to_result_count=len(timings.times),
        failed_attempts=failed or 0,
        attempt_error_kinds=attempt_error_kinds(run) if failed else {},
        tokens={
            "prompt": totals["prompt_tokens"] or 0,
            "completion": totals["completion_tokens"] or 0,
        },
        cost=totals["cost"],
        error_kinds=error_kinds,
        retried=totals["retried"],
        last_finished_at=totals["last_finished_at"],
        unpriced_models=unpriced_models(run),
        steps=step_summary(run, results=results),
    )


UNPRICED_MODELS_SHOWN = 5


def unpriced_models(run: Run) -> list[str]:
    """A few models of the run whose tokens have no price ("" for unnamed)."""
    if not run.unpriced:
        return []
    found = (
        Result.objects.filter(run=run, cost__isnull=True)
        .filter(Q(prompt_tokens__isnull=False) | Q(completion_tokens__isnull=False))
        .order_by("model")
        .values_list("model", flat=True)
        .distinct()
    )
    return list(found[:UNPRICED_MODELS_SHOWN])


def _most_first(pair: tuple[str, int]) -> tuple[int, str]:
    return (-pair[1], pair[0])


def _totals(run: Run) -> dict[str, Any]:
    return (
        Result.objects.filter(run=run)
        .annotate(attempt_total=ATTEMPTS_MADE)
        .aggregate(
            results=Count("id"),
            stopped=Count("id", filter=STOPPED_IN_FLIGHT),
            **{
                status.value: Count("id", filter=Q(status=status))
                for status in ResultStatus
            },
            failed_attempts=Sum("failed_attempts"),
            prompt_tokens=Sum("prompt_tokens"),
            completion_tokens=Sum("completion_tokens"),
            cost=Sum("cost"),
            retried=Count("id", filter=Q(attempt_total__gt=1)),
            last_finished_at=Max("finished_at"),
            **{
                f"kind_{kind.value}": Count("id", filter=Q(error_kind=kind))
                for kind in ErrorKind
            },
        )
    )


def cache_seconds(run: Run) -> int:
    """How long figures of the run stay cached under its results_version."""
    return FINAL_CACHE_SECONDS if run.is_final else CACHE_SECONDS


def cached_for_run[T](run: Run, key: str, compute: Callable[[], T]) -> T:
    """What ``compute`` returns, kept under ``key`` (which names the run's
    ``results_version``) for as long as ``cache_seconds`` says; computed once
    for concurrent misses (``single_flight``)."""
    return single_flight.cached(key, compute, cache_seconds(run))


def store_for_run(model: type[Model], run: Run, **values: Any) -> None:
    """Keep what was computed of ``run`` (``values``, computed now) in its one
    row of ``model``, over the row there is."""
    values["computed_at"] = timezone.now()
    if model._default_manager.filter(run=run).update(**values):
        return
    # Stored at the same moment by another reader: the same figures.
    with contextlib.suppress(IntegrityError), transaction.atomic():
        model._default_manager.create(run=run, **values)


def run_summary_cached(*, run: Run, timings: Timings | None = None) -> RunSummary:
    """``run_summary``, kept under the run's ``results_version``."""
    return cached_for_run(
        run,
        cache_keys.run_summary(run),
        lambda: run_summary(run=run, timings=timings),
    )


def run_scorer_summaries(*, run: Run) -> list[ScorerSummary]:
    """Counts, mean and pass rate per scorer, without pass@k: cheap enough for
    the live progress block of a running run."""
    tallied = tallied_figures(run)
    if tallied is not None:
        figures, results, stopped = tallied
        return _scorer_summaries(run, figures, results=results, stopped=stopped, ks=[])
    score_rows = _score_rows(run)  # before the results: see _scorer_summaries
    counts = Result.objects.filter(run=run).aggregate(
        results=Count("id"), stopped=Count("id", filter=STOPPED_IN_FLIGHT)
    )
    return _scorer_summaries(
        run, score_rows, results=counts["results"], stopped=counts["stopped"], ks=[]
    )


def run_scorer_summaries_cached(*, run: Run) -> list[ScorerSummary]:
    """``run_scorer_summaries``, kept under the run's ``results_version``.

    The key changes whenever a score is stored, so a cached figure is never
    stale; a finished run is aggregated once instead of on every view.
    """
    return cached_for_run(
        run, cache_keys.run_scorers(run), lambda: run_scorer_summaries(run=run)
    )


def run_pass_rates(run: Run) -> dict[str, float | None]:
    """Pass rate per scorer (passed / results, PASS_RATE_DEFINITION), in the
    run's scorer order: the one headline figure of each scorer. None while
    the scorer has no result to count."""
    summaries = run_scorer_summaries_cached(run=run)
    return {summary.scorer: summary.pass_rate for summary in summaries}


def run_score_means(run: Run) -> dict[str, float | None]:
    """Mean score value per scorer, in the run's scorer order.

    Errored scores have no value and are left out of the mean; a scorer with
    no value at all (yet) maps to None.
    """
    summaries = run_scorer_summaries_cached(run=run)
    return {summary.scorer: summary.mean for summary in summaries}
