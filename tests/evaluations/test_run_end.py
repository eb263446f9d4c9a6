"""The end of a run made by an evaluation reaches its hook, once, in the
embedded mode; a hook that fails never fails the run."""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import override_settings

from runs.evaluations.run_end import run_end_claim
from runs.evaluations.services import evaluation_run
from runs.models import Evaluation, Run, RunStatus
from runs.results.services import run_cancel

pytestmark = pytest.mark.django_db(transaction=True)

HOOK = "runs.evaluations.run_end.run_ended"
told: list[int] = []


def broken_hook(run: Run) -> None:
    raise RuntimeError("a channel is down")


def counting_hook(run: Run) -> None:
    told.append(run.pk)


def wait_until_told(run: Run) -> Run:
    deadline = time.monotonic() + 30
    while not (run := Run.objects.get(pk=run.pk)).evaluation_end:
        assert time.monotonic() < deadline, run.status
        time.sleep(0.05)
    return run


def test_a_run_of_an_evaluation_is_told_to_its_hook_when_it_ends(
    evaluation: Evaluation, bob: User
) -> None:
    run = wait_until_told(evaluation_run(evaluation=evaluation, user=bob))
    assert run.status == RunStatus.COMPLETED
    assert run.evaluation_end == f"{run.revision}:{run.status}"


@override_settings(
    EVALSITE_RUN_END_HOOKS=[
        "tests.evaluations.test_run_end.broken_hook",
        HOOK,
    ]
)
def test_a_failing_hook_never_fails_the_run_nor_the_next_hook(
    evaluation: Evaluation, bob: User, caplog: Any
) -> None:
    run = wait_until_told(evaluation_run(evaluation=evaluation, user=bob))
    assert run.status == RunStatus.COMPLETED
    assert not run.error
    assert "a channel is down" in caplog.text


@override_settings(
    EVALSITE_RUN_END_HOOKS=["tests.evaluations.test_run_end.counting_hook"]
)
def test_a_cancelled_pending_run_is_told_too(evaluation: Evaluation, bob: User) -> None:
    told.clear()
    run = Run.objects.create(
        project=evaluation.project,
        dataset=evaluation.dataset,
        target_kind="python",
        evaluation=evaluation,
        total=1,
    )
    run_cancel(run=run, user=bob)
    assert told == [run.pk]


def test_an_end_is_claimed_once_whatever_reports_it(evaluation: Evaluation) -> None:
    run = Run.objects.create(
        project=evaluation.project,
        dataset=evaluation.dataset,
        target_kind="python",
        evaluation=evaluation,
        status=RunStatus.COMPLETED,
    )
    # Its last shard, a settle and a cancel may all report the one end.
    assert [run_end_claim(run) for _ in range(3)] == [True, False, False]
    # A retry ends it again: a new end.
    Run.objects.filter(pk=run.pk).update(revision=1)
    run.refresh_from_db()
    assert run_end_claim(run) is True
