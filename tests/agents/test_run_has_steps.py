"""A run knows whether any of its results has steps: marked with the first
steps stored (by its executor, a retry or an agent's spans), so that the
summary of a run without any never reads steps."""

from __future__ import annotations

import asyncio

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from runs.analysis.summary import run_summary
from runs.executor.engine import execute_run
from runs.models import Project, Run, RunStatus
from runs.plugins.steps import Step
from runs.plugins.targets import TargetInput, TargetOutput
from runs.results.services import run_create
from runs.retry.services import run_retry
from tests.factories import make_dataset, store_outcomes

STEPPED = "tests.agents.test_run_has_steps.stepped"
ECHO = "runs.targets.examples.echo"


def stepped(item: TargetInput) -> TargetOutput:
    """An agent that searched once before answering."""
    steps = [Step(kind="tool", name="search", arguments={"q": item.input})]
    return TargetOutput(output=str(item.expected), steps=steps)


def python_run(project: Project, callable: str) -> Run:
    items = [{"id": str(n), "input": f"q{n}", "expected": "a"} for n in range(3)]
    return run_create(
        user=None,
        dataset=make_dataset(project, items, name=callable.rsplit(".", 1)[1]),
        target_kind="python",
        target_config={"callable": callable},
        scorers=["exact_match"],
        launch=False,
    )


@pytest.fixture
def targets(settings) -> None:
    settings.EVALSITE_PYTHON_TARGETS = [STEPPED, ECHO]


def step_reads(run: Run) -> list[str]:
    """The statements of the run's summary that read steps."""
    with CaptureQueriesContext(connection) as captured:
        run_summary(run=run)
    return [q["sql"] for q in captured.captured_queries if "runs_step" in q["sql"]]


@pytest.mark.django_db(transaction=True)
def test_a_run_is_marked_by_its_first_steps_and_only_then_read_for_them(
    project, targets
) -> None:
    with_steps, without = python_run(project, STEPPED), python_run(project, ECHO)

    for run in (with_steps, without):
        assert asyncio.run(execute_run(run.pk)) == RunStatus.COMPLETED
        run.refresh_from_db()

    assert (with_steps.has_steps, without.has_steps) == (True, False)
    assert step_reads(without) == []
    assert run_summary(run=without).steps is None
    assert step_reads(with_steps)
    assert run_summary(run=with_steps).steps.steps == 3


@pytest.mark.django_db(transaction=True)
def test_a_retry_that_stores_steps_marks_the_run(project, targets) -> None:
    run = python_run(project, STEPPED)
    store_outcomes(run, [{"error": ("transient", "HTTP503", "down")}] * 3)
    Run.objects.filter(pk=run.pk).update(status=RunStatus.FAILED)
    run.refresh_from_db()
    assert not run.has_steps

    run_retry(run=run, user=None, statuses=["failed"], launch=False)
    asyncio.run(execute_run(run.pk))

    run.refresh_from_db()
    assert run.succeeded == 3 and run.has_steps


def test_the_migration_marks_the_runs_that_have_steps(
    migrator: MigrationExecutor,
) -> None:
    before = [("runs", "0034_item_limit_delivery_due")]
    migrator.migrate(before)
    apps = migrator.loader.project_state(before).apps
    project = apps.get_model("runs", "Project").objects.create(name="p")
    dataset = apps.get_model("runs", "Dataset").objects.create(
        project=project, name="d", content_hash="h"
    )
    item = apps.get_model("runs", "Item").objects.create(
        dataset=dataset, index=0, input="q"
    )
    runs, now = {}, timezone.now()
    for name in ("stepped", "plain", "empty"):
        run = apps.get_model("runs", "Run").objects.create(
            project=project, dataset=dataset, name=name, target_kind="python"
        )
        if name != "empty":
            runs[name] = apps.get_model("runs", "Result").objects.create(
                run=run, item=item, item_index=0, started_at=now, finished_at=now
            )
    apps.get_model("runs", "Step").objects.create(
        result=runs["stepped"], index=0, kind="tool", name="search"
    )

    migrator.loader.build_graph()
    migrator.migrate([("runs", "0035_run_has_steps")])

    marked = dict(Run.objects.values_list("name", "has_steps"))
    assert marked == {"stepped": True, "plain": False, "empty": False}
