"""Cost per attempt, per result and per run, through real runs against the
local OpenAI-compatible server (its usage: prompt and answer word counts)."""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

import pytest
from pydantic import Field

from runs.analysis.summary import run_summary
from runs.calls.pricing import Price, PriceTable, cost_of
from runs.executor.engine import execute_run
from runs.executor.items import ItemRunner
from runs.executor.options import RunOptions
from runs.models import ModelPrice, Result, Run, Score
from runs.plugins import Params
from runs.retry.services import run_retry
from runs.scorers import REGISTRY as scorer_registry
from runs.scorers.base import ScoreOutcome, ScorerPlugin
from runs.targets import TargetOutput
from tests.factories import arithmetic_items

pytestmark = pytest.mark.django_db(transaction=True)

PROMPT, COMPLETION = 1000.0, 3000.0  # USD per million: large enough to read


@pytest.fixture(autouse=True)
def fake_price(settings):
    settings.EVALSITE_PRICES = {"fake": (PROMPT, COMPLETION)}


def execute(run: Run) -> str | None:
    status = asyncio.run(execute_run(run.pk))
    run.refresh_from_db()
    return status


def priced(prompt: int, completion: int) -> float:
    return (prompt * PROMPT + completion * COMPLETION) / 1_000_000


def test_every_attempt_result_and_run_carries_its_cost(make_run):
    run = make_run(arithmetic_items(4))
    execute(run)

    results = list(Result.objects.filter(run=run))
    for result in results:
        (attempt,) = result.attempts
        # "What is 1 + 2?" is 5 words; the answer "3" one.
        assert (attempt["prompt_tokens"], attempt["completion_tokens"]) == (5, 1)
        assert attempt["model"] == result.model == "fake"
        assert attempt["cost"] == pytest.approx(priced(5, 1))
        assert result.cost == pytest.approx(priced(5, 1))
    assert run.cost == pytest.approx(sum(r.cost for r in results))
    assert run.unpriced == 0
    assert run.prices == {"fake": [PROMPT, COMPLETION]}


def test_a_retried_item_costs_only_the_attempt_that_reported_tokens(make_run):
    items = arithmetic_items(2)
    items[1]["input"] += "[[flaky:1]]"  # a 500 (no usage), then an answer
    run = make_run(items)
    execute(run)

    result = Result.objects.get(run=run, item_index=1)
    first, second = result.attempts
    assert first["outcome"] == "error" and "cost" not in first
    assert "prompt_tokens" not in first
    assert second["cost"] == pytest.approx(priced(5, 1))
    assert result.cost == pytest.approx(priced(5, 1))
    assert run.cost == pytest.approx(2 * priced(5, 1))


def test_a_failed_attempt_that_used_tokens_is_paid_for(make_run):
    items = arithmetic_items(2)
    items[1]["input"] += "[[nocontent]]"  # 200 with usage, but no content
    run = make_run(items)
    execute(run)

    result = Result.objects.get(run=run, item_index=1)
    assert result.status == Result.Status.FAILED
    assert result.error_type == "MalformedResponse"
    (attempt,) = result.attempts
    assert (attempt["prompt_tokens"], attempt["completion_tokens"]) == (5, 1)
    assert result.cost == attempt["cost"] == pytest.approx(priced(5, 1))
    assert run.cost == pytest.approx(2 * priced(5, 1))


def test_a_retry_inside_the_run_adds_its_cost_to_the_result(make_run):
    items = arithmetic_items(3)
    items[2]["input"] += "[[nocontent]]"
    run = make_run(items)
    execute(run)
    before = Result.objects.get(run=run, item_index=2)

    run_retry(run=run, user=None, statuses=["failed"], launch=False)
    execute(run)

    after = Result.objects.get(run=run, item_index=2)
    assert after.pk == before.pk and len(after.attempts) == 2
    assert after.prompt_tokens == 2 * before.prompt_tokens
    assert after.cost == pytest.approx(2 * before.cost)
    # The run's cost is its results' cost: both rounds of the retried one.
    assert run.cost == pytest.approx(
        sum(Result.objects.filter(run=run).values_list("cost", flat=True))
    )


def test_a_model_without_a_price_has_no_cost_never_zero(make_run, settings):
    settings.EVALSITE_PRICES = {}
    run = make_run(arithmetic_items(3))
    execute(run)

    for result in Result.objects.filter(run=run):
        assert result.prompt_tokens == 5 and result.cost is None
        assert "cost" not in result.attempts[0]
    assert (run.cost, run.unpriced) == (0.0, 3)
    summary = run_summary(run=run)
    assert summary.cost is None and summary.unpriced_models == ["fake"]


def test_a_prefix_prices_the_model_the_endpoint_reports(make_run, settings):
    settings.EVALSITE_PRICES = {"fa*": (PROMPT, COMPLETION)}
    run = make_run(arithmetic_items(2))
    execute(run)
    assert run.cost == pytest.approx(2 * priced(5, 1))


def test_a_run_keeps_the_prices_of_its_first_start(make_run, settings):
    settings.EVALSITE_PRICES = {}
    ModelPrice.objects.create(
        model="fake", prompt_per_million=1000, completion_per_million=3000
    )
    items = arithmetic_items(2)
    items[1]["input"] += "[[nocontent]]"
    run = make_run(items)
    execute(run)
    first = Result.objects.get(run=run, item_index=1).cost

    # The price goes up while the run has items to retry: they keep its price.
    ModelPrice.objects.filter(model="fake").update(prompt_per_million=9000)
    run_retry(run=run, user=None, statuses=["failed"], launch=False)
    execute(run)

    assert Result.objects.get(run=run, item_index=1).cost == pytest.approx(2 * first)
    assert run.prices == {"fake": [1000.0, 3000.0]}


def test_a_cost_the_target_reports_is_kept():
    runner = ItemRunner(
        target=None,  # type: ignore[arg-type]
        scorers=[],
        options=RunOptions(),
        prices=PriceTable({"m": Price(1.0, 1.0)}),
        model="m",
    )
    attempt: dict = {}
    runner.account(
        attempt,
        TargetOutput(output="x", prompt_tokens=5, completion_tokens=5, cost=0.42),
    )
    assert attempt == {
        "prompt_tokens": 5,
        "completion_tokens": 5,
        "model": "m",
        "cost": 0.42,
    }


def test_the_configured_model_prices_what_the_endpoint_names_otherwise():
    runner = ItemRunner(
        target=None,  # type: ignore[arg-type]
        scorers=[],
        options=RunOptions(),
        prices=PriceTable({"gpt-x": Price(1_000_000.0, 0.0)}),
        model="gpt-x",
    )
    attempt: dict = {}
    output = TargetOutput(
        output="x", prompt_tokens=2, completion_tokens=0, model="gpt-x-0613"
    )
    runner.account(attempt, output)
    assert attempt["model"] == "gpt-x-0613" and attempt["cost"] == 2.0


class PricedParams(Params):
    model: str = Field("fake", description="The model whose tokens it prices.")


class PricedJudge(ScorerPlugin):
    """Scores what a million prompt tokens of its model cost, as a judge would
    price its own call."""

    kind: ClassVar[str] = "priced_judge_test"
    label: ClassVar[str] = "Priced judge (test)"
    Params = PricedParams
    example: ClassVar[dict[str, Any]] = {"model": "fake"}
    needs_expected: ClassVar[bool] = False

    def __init__(self, name: str, params: dict[str, Any]) -> None:
        self.name, self.params = name, params

    async def score(self, *, output: Any, item: Any) -> ScoreOutcome:
        cost = cost_of(self.params["model"], 1_000_000, 0)
        return ScoreOutcome(-1.0 if cost is None else cost, None)


class PricedSync(PricedJudge):
    """The same, computed in the scorer worker pool."""

    kind: ClassVar[str] = "priced_sync_test"

    def score(self, *, output: Any, item: Any) -> ScoreOutcome:  # type: ignore[override]
        cost = cost_of(self.params["model"], 1_000_000, 0)
        return ScoreOutcome(-1.0 if cost is None else cost, None)


@pytest.fixture(params=[PricedJudge, PricedSync], ids=["async", "sync"])
def priced_judge(request):
    cls = request.param
    scorer_registry[cls.kind] = cls
    yield cls.kind
    del scorer_registry[cls.kind]


def test_a_judge_prices_its_tokens_with_the_runs_frozen_table(make_run, priced_judge):
    ModelPrice.objects.create(
        model="judge-model", prompt_per_million=7, completion_per_million=0
    )
    run = make_run(
        arithmetic_items(2),
        scorers=[{"kind": priced_judge, "params": {"model": "judge-model"}}],
    )
    # The run's table, as if frozen at an earlier start, says 7; the admin's
    # row says 99 by now: the judge reads the run's.
    Run.objects.filter(pk=run.pk).update(prices={"judge-model": [7.0, 0.0]})
    ModelPrice.objects.filter(model="judge-model").update(prompt_per_million=99)
    execute(run)
    values = Score.objects.filter(result__run=run).values_list("value", flat=True)
    assert list(values) == [7.0, 7.0]
