"""What a queue holds: the results of its source, in the order they are reviewed."""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from django.db.models import Q

from runs.errors import InvalidInput
from runs.models import Result, ResultStatus, ReviewSource, Run, Score
from runs.results.selectors import ResultFilters, result_filter

MAX_ITEMS = 100_000
STRATA = ("passed", "failed", "errored", "unscored")


def _checked_int(value: Any, *, field: str, low: int, high: int) -> int:
    if type(value) is not int or not low <= value <= high:
        raise InvalidInput(f"must be a whole number from {low} to {high}", field=field)
    return value


def _filtered(run: Run, params: Mapping[str, Any], *, field: str) -> list[int]:
    """The run's results that the filters of its results page pick."""
    try:
        filters = ResultFilters.parse(params, run=run)
    except InvalidInput as exc:
        raise InvalidInput(exc.message, field=f"{field}.{exc.field}") from None
    if filters.lists_items:
        raise InvalidInput(
            "pending and skipped items have no output to review",
            field=f"{field}.status",
        )
    return list(result_filter(run=run, filters=filters).values_list("pk", flat=True))


def _stratum(result: Mapping[str, Any], scores: Mapping[int, Mapping[str, Any]]) -> str:
    score = scores.get(result["pk"])
    if result["status"] != ResultStatus.SUCCEEDED or (score and score["error"]):
        return "errored"
    if score is None or score["passed"] is None:
        return "unscored"
    return "passed" if score["passed"] else "failed"


def allocate(sizes: Mapping[str, int], n: int) -> dict[str, int]:
    """``n`` places shared among strata in proportion to their sizes: each
    non-empty stratum gets at least one (when ``n`` allows), the rest go by
    largest remainder, and any excess comes off the largest strata."""
    total = sum(sizes.values())
    n = min(n, total)
    if not total:
        return dict.fromkeys(sizes, 0)
    shares = {name: n * size / total for name, size in sizes.items()}
    least = 1 if n >= sum(1 for size in sizes.values() if size) else 0
    taken = {
        name: min(max(int(share), least if sizes[name] else 0), sizes[name])
        for name, share in shares.items()
    }
    by_remainder = sorted(shares, key=lambda name: int(shares[name]) - shares[name])
    while sum(taken.values()) < n:
        for name in by_remainder:
            if taken[name] < sizes[name] and sum(taken.values()) < n:
                taken[name] += 1
    while sum(taken.values()) > n:
        largest = max(taken, key=lambda name: taken[name])
        taken[largest] -= 1
    return taken


def _sample(run: Run, params: dict[str, Any], *, field: str) -> list[int]:
    """N results drawn at random within each verdict of one scorer."""
    size = _checked_int(
        params.get("size"), field=f"{field}.size", low=1, high=MAX_ITEMS
    )
    scorer = params.get("scorer") or (run.scorer_names or [""])[0]
    if scorer not in run.scorer_names:
        raise InvalidInput("is not a scorer of the run", field=f"{field}.scorer")
    seed = params.setdefault("seed", random.SystemRandom().randrange(2**31))
    _checked_int(seed, field=f"{field}.seed", low=0, high=2**31)
    params["scorer"] = scorer
    results = list(Result.objects.filter(run=run).order_by("item_index", "epoch")
                   .values("pk", "status"))  # fmt: skip
    scores = {
        row["result_id"]: row
        for row in Score.objects.filter(result__run=run, scorer=scorer).values(
            "result_id", "passed", "error"
        )
    }
    strata: dict[str, list[int]] = defaultdict(list)
    for result in results:
        strata[_stratum(result, scores)].append(result["pk"])
    counts = allocate({name: len(strata[name]) for name in STRATA}, size)
    draw = random.Random(seed)
    chosen = {pk for name in STRATA for pk in draw.sample(strata[name], counts[name])}
    return [result["pk"] for result in results if result["pk"] in chosen]


def source_results(
    *, run: Run, source: str, params: dict[str, Any], field: str = "source_params"
) -> list[int]:
    """The ids of the run's results a queue of ``source`` holds, in dataset order.

    ``params`` may be completed (a sample's seed and scorer) so that the
    queue records how it was drawn.
    """
    if source == ReviewSource.RUN:
        picked = Result.objects.filter(run=run).order_by("item_index", "epoch")
        ids = list(picked.values_list("pk", flat=True))
    elif source == ReviewSource.FILTER:
        ids = _filtered(run, params, field=field)
    elif source == ReviewSource.CLUSTER:
        if not isinstance(params.get("cluster"), str) or not params["cluster"]:
            raise InvalidInput("name the cluster's key", field=f"{field}.cluster")
        ids = _filtered(run, {"cluster": params["cluster"]}, field=field)
    elif source == ReviewSource.SAMPLE:
        ids = _sample(run, params, field=field)
    else:
        raise InvalidInput(
            f"must be one of {', '.join(ReviewSource.values)}", field="source"
        )
    if len(ids) > MAX_ITEMS:
        raise InvalidInput(
            f"picks {len(ids)} results; at most {MAX_ITEMS}", field=field
        )
    return ids


def comparison_pairs(
    *, run: Run, other: Run, field: str = "other_run"
) -> list[tuple[int, int, int]]:
    """(item, run's result, other run's result) for each item both runs
    answered, in dataset order (first epoch)."""
    if other.pk == run.pk:
        raise InvalidInput("compare the run with another run", field=field)
    if other.dataset_id != run.dataset_id:
        raise InvalidInput("must be a run of the same dataset version", field=field)
    answered = Q(status=ResultStatus.SUCCEEDED, epoch=0)
    mine = dict(Result.objects.filter(answered, run=run).values_list("item_id", "pk"))
    theirs = Result.objects.filter(answered, run=other).order_by("item_index")
    return [
        (item_id, mine[item_id], pk)
        for item_id, pk in theirs.values_list("item_id", "pk")
        if item_id in mine
    ]
