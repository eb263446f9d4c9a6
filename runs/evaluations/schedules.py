"""Schedules: cron expressions in a time zone, and their ticks.

Whatever ticks them (the embedded server's loop, ``scheduler.py``, or a
procrastinate periodic job, ``periodic.py``) calls ``schedules_tick(now=...)``.
Each schedule's due ticks are those after its ``last_tick_at`` up to now; only
the latest is acted on, so ticks missed while nothing ticked make one run (a
catch-up), not one each. A tick is taken by inserting its row: the unique
(schedule, tick time) constraint lets one process take it, however many tick
at once, on SQLite and PostgreSQL alike. A tick whose evaluation still has a
run going is skipped, and recorded as such.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter
from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.utils import timezone

from runs.access import Action, require
from runs.errors import DomainError, InvalidInput
from runs.evaluations.services import (
    Trigger,
    evaluation_run,
    evaluation_run_going,
)
from runs.models import Evaluation, EvaluationChange, Schedule, ScheduleTick

logger = logging.getLogger(__name__)

CRON_FIELDS = 5
# Missed ticks counted for the record at most (a minutely schedule stopped for
# a year would otherwise count half a million).
MISSED_COUNT_MAX = 10_000


def cron_clean(expression: str, *, field: str = "cron") -> str:
    """A five-field cron expression (minute hour day month weekday), else
    InvalidInput naming ``field``."""
    text = " ".join(expression.split())
    if len(text.split(" ")) != CRON_FIELDS or not croniter.is_valid(text):
        raise InvalidInput(
            f"must be a cron expression of five fields (minute hour day month "
            f"weekday), such as '0 3 * * *', not {expression!r}",
            field=field,
        )
    return text


def zone_clean(name: str, *, field: str = "timezone") -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidInput(
            f"must be a time zone such as 'UTC' or 'Europe/Paris', not {name!r}",
            field=field,
        ) from None


def next_tick(schedule: Schedule, *, after: datetime) -> datetime:
    """The schedule's first tick after ``after``."""
    zone = ZoneInfo(schedule.timezone)
    tick: datetime = croniter(schedule.cron, after.astimezone(zone)).get_next(datetime)
    return tick


def ticks_due(schedule: Schedule, *, now: datetime) -> tuple[datetime | None, int]:
    """The latest tick after ``last_tick_at`` and at most ``now``, and how many
    earlier ones were missed; (None, 0) when none is due."""
    first = next_tick(schedule, after=schedule.last_tick_at)
    if first > now:
        return None, 0
    # Ticks fall on whole minutes: the latest at most now is the one before
    # the first second of now's minute.
    zone = ZoneInfo(schedule.timezone)
    minute = now.astimezone(zone).replace(second=0, microsecond=0)
    latest: datetime = croniter(schedule.cron, minute + timedelta(seconds=1)).get_prev(
        datetime
    )
    missed = 0
    ticks = croniter(schedule.cron, first)
    tick = first
    while tick < latest and missed < MISSED_COUNT_MAX:
        missed += 1
        tick = ticks.get_next(datetime)
    return latest, missed


def schedule_add(
    *,
    evaluation: Evaluation,
    user: User,
    cron: str,
    timezone_name: str = "UTC",
    now: datetime | None = None,
) -> Schedule:
    """Add a schedule to an evaluation; its first tick is the next one after now."""
    require(user, evaluation.project, Action.EDIT)
    expression = cron_clean(cron)
    zone_clean(timezone_name)
    with transaction.atomic():
        schedule = Schedule.objects.create(
            evaluation=evaluation,
            cron=expression,
            timezone=timezone_name,
            last_tick_at=now or timezone.now(),
            created_by=user,
        )
        EvaluationChange.objects.create(
            evaluation=evaluation,
            action=EvaluationChange.Action.SCHEDULED,
            changes={"schedule": [None, f"{expression} ({timezone_name})"]},
            user=user,
        )
    return schedule


def schedule_remove(*, schedule: Schedule, user: User) -> None:
    evaluation = schedule.evaluation
    require(user, evaluation.project, Action.EDIT)
    with transaction.atomic():
        EvaluationChange.objects.create(
            evaluation=evaluation,
            action=EvaluationChange.Action.UNSCHEDULED,
            changes={"schedule": [str(schedule), None]},
            user=user,
        )
        schedule.delete()


def schedule_tick(schedule: Schedule, *, now: datetime) -> ScheduleTick | None:
    """Take the schedule's due tick and act on it; None when none is due or
    another process took it."""
    latest, missed = ticks_due(schedule, now=now)
    if latest is None:
        return None
    try:
        with transaction.atomic():
            # Whoever inserts the row owns the tick; a second insert of it
            # waits for the first to commit, then fails.
            tick = ScheduleTick.objects.create(
                schedule=schedule,
                tick_at=latest,
                outcome=ScheduleTick.Outcome.FAILED,
                missed=missed,
            )
            _cursor_move(schedule, latest)
            _tick_act(tick, schedule)
    except IntegrityError:
        _cursor_move(schedule, latest)
        return None
    return tick


def _cursor_move(schedule: Schedule, tick_at: datetime) -> None:
    Schedule.objects.filter(pk=schedule.pk, last_tick_at__lt=tick_at).update(
        last_tick_at=tick_at
    )


def _tick_act(tick: ScheduleTick, schedule: Schedule) -> None:
    """Start the evaluation, or record why not, in the tick's transaction."""
    # One tick of an evaluation at a time decides whether a run is going.
    evaluation = Evaluation.objects.select_for_update().get(pk=schedule.evaluation_id)
    going = evaluation_run_going(evaluation)
    if going is not None:
        tick.outcome, tick.run = ScheduleTick.Outcome.SKIPPED_RUNNING, going
    else:
        try:
            with transaction.atomic():
                run = evaluation_run(
                    evaluation=evaluation,
                    user=None,
                    trigger=Trigger.SCHEDULE,
                    schedule=schedule,
                )
        except DomainError as exc:
            tick.error = str(exc)
        else:
            tick.run = run
            tick.outcome = (
                ScheduleTick.Outcome.CAUGHT_UP
                if tick.missed
                else ScheduleTick.Outcome.MADE_RUN
            )
    tick.save(update_fields=["outcome", "run", "error"])


def schedules_tick(*, now: datetime | None = None) -> list[ScheduleTick]:
    """Act on every enabled schedule's due tick; returns the ticks this
    process took. One schedule's error is logged, never the others'."""
    now = now or timezone.now()
    taken = []
    for schedule in Schedule.objects.filter(enabled=True).order_by("pk"):
        try:
            tick = schedule_tick(schedule, now=now)
        except Exception:  # a schedule must not stop the others
            logger.exception("schedule %s: its tick failed", schedule.pk)
            continue
        if tick is not None:
            taken.append(tick)
    return taken
