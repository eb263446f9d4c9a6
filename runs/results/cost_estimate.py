"""What a run would cost before it starts, and that figure kept with the run.

Tokens per item come from the last runs of the same target over the same
dataset (the target's tokens, and each judge's by its scorer name), priced
with the price table now, times items times epochs. With no such run there
is no honest figure: the user may send a sample of a few items through the
target for real (``estimate_sample``), which is charged, says so, and is a
run like any other: once it ends, it is the past run the estimate reads.

A judge that no past run used (a scorer added since) is estimated from the
length of its rubric, the items' inputs and the outputs seen (about four
characters a token), and said so.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from django.db.models import Count, Q, QuerySet, Sum

from runs.calls.pricing import PriceTable, configured_model, price_table
from runs.executor.options import RunOptions
from runs.models import FINAL_RUN_STATUSES, Dataset, Item, Result, Run, Score, Target

PAST_RUNS = 5
CHARS_PER_TOKEN = 4.0
# A judge's reply when none was seen: a verdict and a sentence of reason.
JUDGE_REPLY_TOKENS = 60
JUDGE_KINDS = frozenset({"llm_judge"})
PAST_RUNS_BASIS = "past_runs"
NO_BASIS = "none"
_USED = Q(prompt_tokens__isnull=False) | Q(completion_tokens__isnull=False)


@dataclass(slots=True)
class Part:
    """What one caller (the target, or one judge) uses per result, on average."""

    prompt_tokens: float = 0.0
    completion_tokens: float = 0.0
    cost: float | None = 0.0  # US dollars per result; None: some tokens unpriced
    source: str = PAST_RUNS_BASIS  # or "text_length"
    unpriced: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Estimate:
    """What a run would cost (None: no basis, or tokens without a price)."""

    cost: float | None
    basis: str  # PAST_RUNS_BASIS or NO_BASIS
    items: int
    epochs: int
    runs: list[int] = field(default_factory=list)
    target: Part | None = None
    judges: dict[str, Part] = field(default_factory=dict)
    budget: float | None = None
    note: str = ""

    @property
    def results(self) -> int:
        return self.items * self.epochs

    @property
    def over_budget(self) -> bool:
        if self.cost is None or self.budget is None:
            return False
        return self.cost > self.budget

    @property
    def unpriced(self) -> list[str]:
        parts = [self.target, *self.judges.values()]
        return sorted({m for part in parts if part for m in part.unpriced})

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data |= {"results": self.results, "over_budget": self.over_budget}
        return data | {"unpriced": self.unpriced}


def past_runs(
    *,
    dataset: Dataset,
    target: Target | None,
    target_kind: str,
    target_config: dict[str, Any],
    exclude: int | None = None,
) -> list[Run]:
    """The last finished runs of this target over this dataset that did something."""
    runs = Run.objects.filter(dataset=dataset, status__in=FINAL_RUN_STATUSES)
    if target is not None:
        runs = runs.filter(target=target)
    else:
        runs = runs.filter(target_kind=target_kind, target_config=target_config)
    runs = runs.filter(Q(succeeded__gt=0) | Q(failed__gt=0))
    if exclude is not None:
        runs = runs.exclude(pk=exclude)
    return list(runs.order_by("-created_at", "-id")[:PAST_RUNS])


def _priced(rows: QuerySet[Any], count: int, prices: PriceTable, model: str) -> Part:
    part = Part()
    for row in rows:
        prompt, completion = row["prompt"] or 0, row["completion"] or 0
        part.prompt_tokens += prompt / count
        part.completion_tokens += completion / count
        name = row["model"] or model
        cost = prices.cost(name, prompt, completion)
        if cost is None:
            part.unpriced.append(name or "(unnamed model)")
            part.cost = None
        elif part.cost is not None:
            part.cost += cost / count
    return part


def _usage(queryset: QuerySet[Any]) -> QuerySet[Any]:
    return (
        queryset.filter(_USED)
        .values("model")
        .annotate(
            prompt=Sum("prompt_tokens"),
            completion=Sum("completion_tokens"),
            n=Count("id"),
        )
        .order_by("model")
    )


def _mean_chars(values: Sequence[Any]) -> float:
    if not values:
        return 0.0
    texts = [v if isinstance(v, str) else json.dumps(v) for v in values]
    return sum(map(len, texts)) / len(texts)


def _judge_by_length(
    spec: dict[str, Any], *, dataset: Dataset, output_chars: float, prices: PriceTable
) -> Part:
    params = spec.get("params") or {}
    inputs = Item.objects.filter(dataset=dataset).order_by("index")[:50]
    input_chars = _mean_chars([item.input for item in inputs])
    rubric = str(params.get("system_prompt") or "") + str(
        params.get("prompt_template") or ""
    )
    prompt = math.ceil((len(rubric) + input_chars + output_chars) / CHARS_PER_TOKEN)
    completion = min(
        int(params.get("max_tokens") or JUDGE_REPLY_TOKENS), JUDGE_REPLY_TOKENS
    )
    model = str(params.get("model") or "")
    cost = prices.cost(model, prompt, completion)
    return Part(
        prompt_tokens=float(prompt),
        completion_tokens=float(completion),
        cost=cost,
        source="text_length",
        unpriced=[] if cost is not None else [model or "(unnamed model)"],
    )


def estimate(
    *,
    dataset: Dataset,
    target: Target | None,
    target_kind: str,
    target_config: dict[str, Any],
    scorers: list[dict[str, Any]],
    options: RunOptions,
    exclude: int | None = None,
    items: int | None = None,
) -> Estimate:
    """What a run of these would cost, from the last runs of its target
    (over ``items`` of the dataset's items: all of them when None)."""
    prices = price_table()
    found = Estimate(
        cost=None,
        basis=NO_BASIS,
        items=dataset.item_count if items is None else items,
        epochs=options.epochs,
        budget=options.cost_budget,
    )
    runs = past_runs(
        dataset=dataset,
        target=target,
        target_kind=target_kind,
        target_config=target_config,
        exclude=exclude,
    )
    if not runs:
        found.note = (
            "no finished run of this target over this dataset yet: send a "
            "sample of a few items through it (charged) to estimate"
        )
        return found
    results = Result.objects.filter(run__in=runs).exclude(
        status=Result.Status.CANCELLED
    )
    count = results.count()
    if count == 0:
        found.note = "the past runs of this target have no result to learn from"
        return found
    model = configured_model(target_config) or ""
    found.basis, found.runs = PAST_RUNS_BASIS, [run.pk for run in runs]
    found.target = _priced(_usage(results), count, prices, model)
    outputs = results.filter(status=Result.Status.SUCCEEDED).values_list(
        "output", flat=True
    )[:50]
    output_chars = _mean_chars(list(outputs))
    for spec in scorers:
        name = spec.get("name") or spec["kind"]
        scores = Score.objects.filter(result__in=results, scorer=name)
        if scores.filter(_USED).exists():
            found.judges[name] = _priced(_usage(scores), count, prices, "")
        elif spec["kind"] in JUDGE_KINDS:
            found.judges[name] = _judge_by_length(
                spec, dataset=dataset, output_chars=output_chars, prices=prices
            )
    per_result = [found.target.cost, *(j.cost for j in found.judges.values())]
    if None not in per_result:
        found.cost = round(sum(c for c in per_result if c) * found.results, 9)
    return found


def estimate_record(run: Run) -> Run:
    """Keep with a new run what it was expected to cost."""
    found = estimate(
        dataset=run.dataset,
        target=run.target,
        target_kind=run.target_kind,
        target_config=run.target_config,
        scorers=run.scorers,
        options=RunOptions.from_dict(run.options, path="options"),
        exclude=run.pk,
        items=run.item_limit,
    )
    run.estimated_cost = found.cost
    run.estimate_basis = found.as_dict()
    Run.objects.filter(pk=run.pk).update(
        estimated_cost=run.estimated_cost, estimate_basis=run.estimate_basis
    )
    return run
