"""A run's cost budget: it drains the run, and a higher one resumes it."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys

import pytest

from runs.errors import Conflict, Forbidden, InvalidInput
from runs.executor.engine import execute_run
from runs.models import Result, Run, RunStatus
from runs.retry.resume import run_resume
from tests.factories import arithmetic_items
from tests.processes import ROOT, env_for

pytestmark = pytest.mark.django_db(transaction=True)

# "What is 1 + 2?" is 5 prompt words, "3" one completion word: each item
# costs (5 * 1000 + 1 * 3000) / 1e6 = $0.008.
ITEM_COST = 0.008


@pytest.fixture(autouse=True)
def fake_price(settings):
    settings.EVALSITE_PRICES = {"fake": (1000.0, 3000.0)}


def execute(run: Run) -> str | None:
    status = asyncio.run(execute_run(run.pk))
    run.refresh_from_db()
    return status


def balanced(run: Run) -> bool:
    stored = Result.objects.filter(run=run).count()
    return run.processed == stored and run.processed + run.skipped == run.total


def test_the_budget_stops_the_run_and_skips_the_rest(make_run):
    run = make_run(arithmetic_items(10), concurrency=1, cost_budget=0.02)
    assert execute(run) == RunStatus.FAILED

    # One item at a time: the third brings the cost to $0.024, past $0.02.
    assert run.processed == 3 and run.skipped == 7
    assert balanced(run)
    assert run.error.startswith("cost budget of $0.02 reached: $0.024 spent")
    assert "resume with a higher budget" in run.error
    assert run.cost == pytest.approx(3 * ITEM_COST)


def test_a_budget_reached_by_the_last_item_skips_nothing(make_run):
    run = make_run(arithmetic_items(3), concurrency=1, cost_budget=0.02)
    assert execute(run) == RunStatus.COMPLETED
    assert (run.processed, run.skipped, run.error) == (3, 0, "")


def test_items_in_flight_finish_and_the_overshoot_is_bounded_by_them(make_run):
    concurrency = 4
    items = arithmetic_items(30, marker="[[latency:30]]")
    run = make_run(items, concurrency=concurrency, cost_budget=0.05)
    execute(run)

    assert run.status == RunStatus.FAILED and run.skipped > 0
    assert balanced(run)
    # Nothing in flight was cut short: every stored item succeeded.
    assert run.succeeded == run.processed and run.cancelled == 0
    assert 0.05 <= run.cost < 0.05 + concurrency * ITEM_COST


def test_a_budget_spent_before_the_start_runs_nothing(make_run):
    run = make_run(arithmetic_items(4), cost_budget=0)
    execute(run)
    assert (run.processed, run.skipped) == (0, 4)
    assert run.error.startswith("cost budget of $0.00 reached")


def test_a_budget_cannot_be_kept_without_a_price(make_run, settings):
    settings.EVALSITE_PRICES = {}
    run = make_run(arithmetic_items(5), concurrency=1, cost_budget=1)
    execute(run)
    assert run.status == RunStatus.FAILED
    assert (run.processed, run.skipped) == (1, 4)
    assert run.error.startswith(
        "cost budget of $1.00 cannot be kept: no price for model 'fake'"
    )


def test_resume_with_a_higher_budget_finishes_the_run(make_run):
    run = make_run(arithmetic_items(10), concurrency=1, cost_budget=0.02)
    execute(run)
    first = dict(Result.objects.filter(run=run).values_list("item_index", "pk"))
    spent = run.cost

    resumed = run_resume(run=run, user=None, options={"cost_budget": 1.0}, launch=False)
    assert resumed.status == RunStatus.PENDING
    assert resumed.options["cost_budget"] == 1.0
    assert execute(run) == RunStatus.COMPLETED

    assert (run.processed, run.skipped, run.total) == (10, 0, 10)
    later = dict(Result.objects.filter(run=run).values_list("item_index", "pk"))
    assert {i: later[i] for i in first} == first  # the paid work is kept
    assert run.cost == pytest.approx(spent + 7 * ITEM_COST)
    assert run.cost == pytest.approx(10 * ITEM_COST)
    assert run.error == ""


def test_resume_that_reaches_the_new_budget_stops_again(make_run):
    run = make_run(arithmetic_items(10), concurrency=1, cost_budget=0.02)
    execute(run)
    run_resume(run=run, user=None, options={"cost_budget": 0.04}, launch=False)
    execute(run)
    assert run.processed == 5 and balanced(run)
    assert run.error.startswith("cost budget of $0.04 reached")


def test_resume_refuses_a_budget_already_spent(make_run):
    run = make_run(arithmetic_items(6), concurrency=1, cost_budget=0.02)
    execute(run)
    with pytest.raises(InvalidInput) as caught:
        run_resume(run=run, user=None, options={"cost_budget": 0.02}, launch=False)
    assert caught.value.field == "options.cost_budget"
    assert "already cost $0.024" in str(caught.value)
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED  # nothing changed


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"concurrency": 2}, "options.concurrency"),
        ({"cost_budget": -1}, "options.cost_budget"),
        ({"cost_budget": "lots"}, "options.cost_budget"),
    ],
)
def test_resume_names_an_option_it_refuses(make_run, options, field):
    run = make_run(arithmetic_items(6), concurrency=1, cost_budget=0.02)
    execute(run)
    with pytest.raises(InvalidInput) as caught:
        run_resume(run=run, user=None, options=options, launch=False)
    assert caught.value.field == field


def test_resume_without_a_budget_runs_the_rest(make_run):
    run = make_run(arithmetic_items(6), concurrency=1, cost_budget=0.02)
    execute(run)
    run_resume(run=run, user=None, options={"cost_budget": ""}, launch=False)
    assert execute(run) == RunStatus.COMPLETED
    assert run.options["cost_budget"] is None


def test_a_run_with_every_result_has_nothing_to_resume(make_run):
    run = make_run(arithmetic_items(2))
    execute(run)
    with pytest.raises(Conflict):
        run_resume(run=run, user=None, options={"cost_budget": 5}, launch=False)


def test_a_viewer_cannot_resume(make_run, victor):
    run = make_run(arithmetic_items(4), concurrency=1, cost_budget=0.01)
    execute(run)
    with pytest.raises(Forbidden):
        run_resume(run=run, user=victor, options={"cost_budget": 5}, launch=False)


# -- evalrun ---------------------------------------------------------------------


def test_evalrun_stops_at_the_budget_and_resumes_with_a_higher_one(
    data_dir, fake_openai, tmp_path
):
    dataset = tmp_path / "arith.jsonl"
    dataset.write_text("".join(json.dumps(item) + "\n" for item in arithmetic_items(8)))
    env = {**env_for(data_dir), "EVALSITE_PRICES": '{"fake": [1000, 3000]}'}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "manage.py", "evalrun", *args]
        return subprocess.run(
            command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
        )

    first = cli(
        str(dataset),
        "--target", "openai_chat",
        "--base-url", fake_openai.base_url,
        "--model", "fake",
        "--scorer", "exact_match",
        "--concurrency", "1",
        "--cost-budget", "0.02",
        "--json",
    )  # fmt: skip
    assert first.returncode == 1, first.stderr
    summary = json.loads(first.stdout)
    assert (summary["succeeded"], summary["skipped"]) == (3, 5)
    with sqlite3.connect(data_dir / "evalsite.sqlite3") as db:
        (error,) = db.execute("select error from runs_run").fetchone()
    assert error.startswith("cost budget of $0.02 reached")

    again = cli("--resume", str(summary["run_id"]), "--cost-budget", "5")
    assert again.returncode == 0, again.stderr
    # The closing lines (no --json): all eight items, and what they cost.
    assert "completed: 8 answered" in again.stderr
    assert "tokens: 40 prompt + 8 completion, cost $0.064" in again.stderr
    with sqlite3.connect(data_dir / "evalsite.sqlite3") as db:
        (options,) = db.execute("select options from runs_run").fetchone()
    assert json.loads(options)["cost_budget"] == 5
