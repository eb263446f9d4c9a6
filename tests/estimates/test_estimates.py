"""The cost before the spend: estimated from past runs or a paid sample, and
held against what the run then cost."""

from __future__ import annotations

import asyncio
import time

import pytest

from runs.demo.seed import demo_seed
from runs.estimates.services import estimate_sample, run_estimate
from runs.executor.engine import execute_run
from runs.models import Run, Target
from runs.results.cost_estimate import NO_BASIS, PAST_RUNS_BASIS
from runs.results.services import run_create
from tests.factories import arithmetic_items, make_dataset

live_db = pytest.mark.django_db(transaction=True)
FAST = {"backoff_base_seconds": 0.01, "backoff_max_seconds": 0.05}
TOLERANCE = 0.15


@pytest.fixture(autouse=True)
def prices(settings):
    settings.EVALSITE_PRICES = {
        "fake": (1000.0, 3000.0),
        "fake-judge*": (500.0, 1500.0),
        "demo": (1.0, 2.0),
    }


def wait_final(run: Run) -> Run:
    deadline = time.monotonic() + 60
    while not (run := Run.objects.get(pk=run.pk)).is_final:
        assert time.monotonic() < deadline, run.status
        time.sleep(0.05)
    return run


def fake_setup(project, server, count: int = 20):
    dataset = make_dataset(project, arithmetic_items(count))
    target = Target.objects.create(
        project=project,
        name="fake",
        kind="openai_chat",
        config={"base_url": server.base_url, "model": "fake"},
    )
    judge = {
        "kind": "llm_judge",
        "name": "judge",
        "params": {"base_url": server.base_url, "model": "fake-judge", **FAST},
    }
    return dataset, target, ["exact_match", judge]


def error(estimated: float, actual: float) -> float:
    return abs(estimated - actual) / actual


@live_db
def test_with_no_past_run_there_is_no_figure_but_a_sample(project, alice, fake_openai):
    dataset, target, scorers = fake_setup(project, fake_openai)
    found = run_estimate(user=alice, dataset=dataset, target=target, scorers=scorers)
    assert (found.basis, found.cost) == (NO_BASIS, None)
    assert "sample" in found.note


@live_db
def test_a_sample_then_the_run_cost_what_was_estimated(project, alice, fake_openai):
    dataset, target, scorers = fake_setup(project, fake_openai)
    sample = estimate_sample(
        user=alice, dataset=dataset, target=target, scorers=scorers, items=4
    )
    sample = wait_final(sample)
    assert sample.name == "Cost sample: 4 items"
    assert (sample.status, sample.total, sample.processed) == ("completed", 4, 4)
    assert sample.cost > 0  # it was charged, as any run is
    found = run_estimate(
        user=alice, dataset=dataset, target=target, scorers=scorers,
        options={"epochs": 2, "cost_budget": 0.01},
    )  # fmt: skip
    assert (found.basis, found.runs, found.results) == (
        PAST_RUNS_BASIS,
        [sample.pk],
        40,
    )
    assert found.judges["judge"].source == PAST_RUNS_BASIS
    assert found.over_budget
    run = run_create(
        user=alice,
        dataset=dataset,
        target=target,
        scorers=scorers,
        options={"epochs": 2, "concurrency": 8, **FAST},
        launch=False,
    )
    assert run.estimate_basis["basis"] == PAST_RUNS_BASIS
    asyncio.run(execute_run(run.pk))
    run.refresh_from_db()
    print(f"fake server: estimated {run.estimated_cost:.6f}, cost {run.cost:.6f}")
    assert error(run.estimated_cost, run.cost) <= TOLERANCE


@live_db
def test_a_judge_added_since_is_estimated_from_text_length(project, alice, fake_openai):
    dataset, target, scorers = fake_setup(project, fake_openai)
    first = run_create(
        user=alice, dataset=dataset, target=target, scorers=["exact_match"],
        options={"concurrency": 8, **FAST}, launch=False,
    )  # fmt: skip
    asyncio.run(execute_run(first.pk))
    found = run_estimate(user=alice, dataset=dataset, target=target, scorers=scorers)
    assert found.judges["judge"].source == "text_length"
    assert found.judges["judge"].prompt_tokens > 0 and found.cost is not None


@live_db
def test_the_demo_costs_what_was_estimated():
    seed = demo_seed()
    target = Target.objects.get(project=seed.project, name="Demo model")
    dataset = seed.datasets[0]
    options = {"concurrency": 50}
    sample = estimate_sample(
        user=seed.user, dataset=dataset, target=target,
        scorers=["exact_match"], options=options, items=5,
    )  # fmt: skip
    wait_final(sample)
    run = run_create(
        user=seed.user, dataset=dataset, target=target,
        scorers=["exact_match"], options=options, launch=False,
    )  # fmt: skip
    asyncio.run(execute_run(run.pk))
    run.refresh_from_db()
    print(f"demo: estimated {run.estimated_cost:.6f}, cost {run.cost:.6f}")
    assert run.estimate_basis["runs"] == [sample.pk]
    assert error(run.estimated_cost, run.cost) <= TOLERANCE
