"""Schedules ticked with a controlled clock: runs, catch-ups, skips, one taker."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.contrib.auth.models import User

from runs.errors import Forbidden, InvalidInput
from runs.evaluations.schedules import (
    next_tick,
    schedule_add,
    schedule_tick,
    schedules_tick,
)
from runs.evaluations.services import evaluation_run
from runs.models import (
    Dataset,
    Evaluation,
    Project,
    Run,
    Schedule,
    ScheduleTick,
    Target,
)
from tests.evaluations.conftest import T0, at, finish, make_evaluation
from tests.factories import arithmetic_items, make_dataset

pytestmark = pytest.mark.django_db


def every_minute(evaluation: Evaluation, user: User) -> Schedule:
    return schedule_add(evaluation=evaluation, user=user, cron="* * * * *", now=T0)


def test_every_minute_makes_one_run_per_tick(evaluation: Evaluation, bob: User) -> None:
    schedule = every_minute(evaluation, bob)
    assert schedules_tick(now=at(0.5)) == []
    [first] = schedules_tick(now=at(1))
    assert schedules_tick(now=at(1.5)) == []  # the same tick, taken already
    finish(first.run)
    [second] = schedules_tick(now=at(2.2))
    runs = list(Run.objects.filter(evaluation=evaluation).order_by("pk"))
    assert [run.pk for run in runs] == [first.run_id, second.run_id]
    assert [t.tick_at for t in (first, second)] == [at(1), at(2)]
    assert {t.outcome for t in (first, second)} == {ScheduleTick.Outcome.MADE_RUN}
    assert all(run.schedule_id == schedule.pk for run in runs)
    assert {run.evaluation_trigger for run in runs} == {"schedule"}
    assert all(run.created_by is None for run in runs)


def test_a_restart_across_three_ticks_makes_one_catch_up_run(
    evaluation: Evaluation, bob: User
) -> None:
    every_minute(evaluation, bob)
    # Nothing ticked at 12:01, 12:02 or 12:03; a server starts at 12:03:20.
    [tick] = schedules_tick(now=at(3 + 1 / 3))
    assert tick.outcome == ScheduleTick.Outcome.CAUGHT_UP
    assert (tick.tick_at, tick.missed) == (at(3), 2)
    assert Run.objects.filter(evaluation=evaluation).count() == 1
    assert schedules_tick(now=at(3.5)) == []


def test_a_tick_while_the_previous_run_goes_is_skipped_and_recorded(
    evaluation: Evaluation, bob: User
) -> None:
    every_minute(evaluation, bob)
    [made] = schedules_tick(now=at(1))
    [skipped] = schedules_tick(now=at(2))
    assert skipped.outcome == ScheduleTick.Outcome.SKIPPED_RUNNING
    assert skipped.run_id == made.run_id
    assert Run.objects.filter(evaluation=evaluation).count() == 1
    finish(made.run)
    [again] = schedules_tick(now=at(3))
    assert again.outcome == ScheduleTick.Outcome.MADE_RUN
    outcomes = list(
        ScheduleTick.objects.order_by("tick_at").values_list("outcome", flat=True)
    )
    assert outcomes == ["made_run", "skipped_running", "made_run"]


def test_a_tick_is_taken_once_by_processes_that_read_the_schedule_at_once(
    evaluation: Evaluation, bob: User
) -> None:
    schedule = every_minute(evaluation, bob)
    # Two processes read the schedule before either took its tick.
    mine, theirs = (Schedule.objects.get(pk=schedule.pk) for _ in range(2))
    assert schedule_tick(mine, now=at(1)) is not None
    assert schedule_tick(theirs, now=at(1)) is None
    assert ScheduleTick.objects.count() == 1
    assert Run.objects.filter(evaluation=evaluation).count() == 1


def test_a_tick_that_cannot_start_is_recorded_with_its_reason(
    project: Project, dataset: Dataset, bob: User
) -> None:
    target = Target.objects.create(
        project=project, name="echo", kind="python", config={"callable": "x.y"}
    )
    evaluation = make_evaluation(
        project,
        dataset,
        bob,
        target=target,
        target_kind=None,
        target_config=None,
    )
    every_minute(evaluation, bob)
    target.delete()
    [tick] = schedules_tick(now=at(1))
    assert tick.outcome == ScheduleTick.Outcome.FAILED
    assert "target" in tick.error and "deleted" in tick.error
    assert not Run.objects.filter(evaluation=evaluation).exists()


def test_a_schedule_reads_its_expression_in_its_time_zone(
    evaluation: Evaluation, bob: User
) -> None:
    schedule = schedule_add(
        evaluation=evaluation,
        user=bob,
        cron="0 3 * * *",
        timezone_name="Europe/Paris",
        now=T0,
    )
    # 03:00 in Paris is 02:00 UTC in winter and 01:00 UTC in summer.
    assert next_tick(schedule, after=T0) == datetime(2026, 11, 27, 2, tzinfo=UTC)
    summer = datetime(2026, 7, 1, tzinfo=UTC)
    assert next_tick(schedule, after=summer) == datetime(2026, 7, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("cron", "zone", "field"),
    [
        ("every minute", "UTC", "cron"),
        ("* * * * * *", "UTC", "cron"),
        ("61 * * * *", "UTC", "cron"),
        ("* * * * *", "Mars/Olympus", "timezone"),
    ],
)
def test_a_bad_schedule_is_refused_naming_its_field(
    evaluation: Evaluation, bob: User, cron: str, zone: str, field: str
) -> None:
    with pytest.raises(InvalidInput) as refused:
        schedule_add(evaluation=evaluation, user=bob, cron=cron, timezone_name=zone)
    assert refused.value.field == field
    assert not Schedule.objects.exists()


def test_a_disabled_schedule_does_not_tick(evaluation: Evaluation, bob: User) -> None:
    schedule = every_minute(evaluation, bob)
    Schedule.objects.filter(pk=schedule.pk).update(enabled=False)
    assert schedules_tick(now=at(5)) == []
    assert not Run.objects.exists()


def test_a_viewer_cannot_schedule(evaluation: Evaluation, victor: User) -> None:
    with pytest.raises(Forbidden):
        schedule_add(evaluation=evaluation, user=victor, cron="* * * * *")


def test_an_evaluation_of_the_latest_version_runs_the_newest_one(
    project: Project, dataset: Dataset, bob: User
) -> None:
    evaluation = make_evaluation(project, dataset, bob, dataset_policy="latest")
    newer = make_dataset(project, arithmetic_items(4), version=2)
    run = evaluation_run(evaluation=evaluation, user=bob)
    assert run.dataset_id == newer.pk
    assert run.total == 4
    fixed = make_evaluation(project, dataset, bob, name="fixed")
    assert evaluation_run(evaluation=fixed, user=bob).dataset_id == dataset.pk
