"""A run's figures are stored when it ends and read back while they are current."""

from __future__ import annotations

import asyncio

import pytest
from django.core.cache import cache

from runs.analysis.charts import run_charts
from runs.analysis.figures import run_figures
from runs.analysis.summary import run_summary
from runs.analysis.verdicts import PASSED, run_verdicts
from runs.executor.engine import execute_run
from runs.executor.rescore import execute_scoring_pass
from runs.models import Run, RunFigures, RunVerdicts
from runs.rescore.services import run_rescore
from runs.retry.services import run_retry
from tests.executor.test_retry import ended_with_failures, flaky

pytestmark = pytest.mark.django_db(transaction=True)


def execute(run: Run) -> None:
    asyncio.run(execute_run(run.pk))
    run.refresh_from_db()


def test_an_ended_run_has_its_figures_stored_as_computed(make_run) -> None:
    run = make_run(flaky(6, {1}), max_attempts=1, epochs=2)
    execute(run)

    stored = RunFigures.objects.get(run=run)
    summary, charts = run_figures(run=run)

    assert stored.version.endswith(run.results_version)
    assert summary == run_summary(run=run)
    assert charts == run_charts(run=run, summary=summary)
    assert summary.has_pass_at_k and summary.scorers[0].pass_at_k
    assert summary.scorers[0].pass_rate_ci is not None


def test_stored_figures_are_what_the_page_reads(make_run) -> None:
    run = ended_with_failures(make_run)
    # The stored row is read, not the results: alter it and the page shows it.
    stored = RunFigures.objects.get(run=run)
    stored.data["summary"]["retried"] = 12345
    stored.save()
    cache.clear()  # another process, or this one later: no cached copy

    summary, _charts = run_figures(run=run)

    assert summary.retried == 12345


def test_a_retry_makes_the_stored_figures_stale_and_stores_new_ones(
    make_run,
) -> None:
    run = ended_with_failures(make_run)
    before = RunFigures.objects.get(run=run).version
    assert run_figures(run=run)[0].counts["failed"] == 2

    run_retry(run=run, user=None, statuses=["failed"], launch=False)
    execute(run)

    summary, _charts = run_figures(run=run)
    assert summary.counts["failed"] == 0
    assert RunFigures.objects.get(run=run).version != before


def test_figures_of_another_shape_are_computed_again(make_run) -> None:
    run = ended_with_failures(make_run)
    RunFigures.objects.filter(run=run).update(data={"summary": {"old": 1}})
    cache.clear()

    summary, _charts = run_figures(run=run)

    assert summary == run_summary(run=run)
    assert RunFigures.objects.get(run=run).data["summary"]["run"] == run.pk


def test_a_running_run_has_no_stored_figures(make_run) -> None:
    run = make_run(flaky(3, set()), max_attempts=1)

    run_figures(run=run)

    assert not RunFigures.objects.filter(run=run).exists()


def test_a_rescore_stores_the_figures_of_its_new_scores(make_run) -> None:
    run = ended_with_failures(make_run)
    plan = run_rescore(
        run=run, user=None, scorers=[{"kind": "includes", "name": "has"}], launch=False
    )
    asyncio.run(execute_scoring_pass(plan.scoring_pass.pk))
    run.refresh_from_db()

    stored = RunFigures.objects.get(run=run)
    assert stored.version.endswith(run.results_version)
    names = [s["scorer"] for s in stored.data["summary"]["scorers"]]
    assert names == ["exact_match", "has"]


def test_an_ended_single_epoch_run_has_its_verdicts_stored(make_run) -> None:
    run = ended_with_failures(make_run)

    stored = RunVerdicts.objects.get(run=run)

    assert stored.version.endswith(run.results_version)
    assert stored.scorers == run.scorer_names
    got = run_verdicts(run=run)
    assert len(got.items) == run.total
    assert int((got.states[:, 0] & PASSED > 0).sum()) == run.succeeded
