"""An agent's model calls are retried once, by the run's rules: an item whose
call failed for good is not run again, so the calls it makes are bounded by
the run's attempts, never item attempts times call attempts."""

from __future__ import annotations

import asyncio

import pytest

from runs.calls.limits import use_call_rate
from runs.calls.retry import Backoff, RunRetries, use_run_retries
from runs.executor.engine import execute_run
from runs.models import Result, RunStatus
from runs.plugins.targets import TargetError, TargetInput, build_target
from tests.agents.conftest import agent_config

pytestmark = pytest.mark.django_db(transaction=True)

DOWN = "tests.agents.test_agent_retries.upstream_down"


def upstream_down() -> str:
    """A tool whose answer has the model's next call get a 503, every time."""
    return "[[status:503]]"


@pytest.fixture
def down_tool(settings) -> list[dict]:
    settings.EVALSITE_PYTHON_TOOLS = [DOWN]
    return [{"kind": "python", "name": "search", "params": {"callable": DOWN}}]


def failed_calls(make_agent_run, agent_model, tools, options, **params) -> Result:
    run = make_agent_run(
        [{"input": "What is 2 + 3?"}],
        agent_config(agent_model, tools, **params),
        **options,
    )
    assert asyncio.run(execute_run(run.pk)) == RunStatus.FAILED  # its one item failed
    return Result.objects.get(run=run)


def test_a_model_call_that_fails_for_good_is_not_retried_again_with_its_item(
    make_agent_run, agent_model, down_tool
) -> None:
    result = failed_calls(make_agent_run, agent_model, down_tool, {"max_attempts": 3})

    # The first call, then the second's three attempts: not 3 x (1 + 3).
    assert agent_model.stats.requests == 1 + 3
    assert agent_model.stats.statuses[503] == 3
    assert (result.error_kind, result.error_type) == ("transient", "HTTP503")
    assert len(result.attempts) == 1
    assert "not run again" in result.attempts[0]["note"]
    kinds = list(result.steps.order_by("index").values_list("kind", "error_type"))
    assert kinds == [("model", ""), ("tool", ""), ("model", "HTTP503")]


def test_a_runs_attempts_bound_an_agents_call_attempts(
    make_agent_run, agent_model, down_tool
) -> None:
    failed_calls(
        make_agent_run,
        agent_model,
        down_tool,
        {"max_attempts": 2},
        call_max_attempts=5,
    )

    assert agent_model.stats.requests == 1 + 2


def test_an_agents_call_retries_spend_the_runs_retry_budget(
    make_agent_run, agent_model, down_tool
) -> None:
    failed_calls(
        make_agent_run,
        agent_model,
        down_tool,
        {"max_attempts": 3, "retry_budget": 1},
    )

    assert agent_model.stats.requests == 1 + 2


class Counted:
    """A request rate that counts the calls it lets go."""

    def __init__(self) -> None:
        self.calls = 0

    async def acquire(self) -> None:
        self.calls += 1


def test_an_agents_retried_calls_are_paced_by_the_runs_rate(
    agent_model, down_tool
) -> None:
    target = build_target("agent", agent_config(agent_model, down_tool))
    rate = Counted()
    item = TargetInput(index=0, external_id="a", input="What is 2 + 3?")

    async def attempt() -> None:
        retries = RunRetries(3, Backoff(0.001, 0.002))
        with (
            use_call_rate(rate),
            use_run_retries(retries),
            pytest.raises(TargetError),
        ):
            await target.generate(item)
        await target.aclose()

    asyncio.run(attempt())

    assert agent_model.stats.requests == 1 + 3
    # Every call but the attempt's first (which the executor paced).
    assert rate.calls == 3
