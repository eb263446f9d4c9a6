"""A finished run to export: two epochs, failures, two scorers, awkward text."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.contrib.auth.models import User
from django.utils import timezone

from runs.executor.store import ResultRecord, ScoreRecord, results_write
from runs.models import Item, Project, Run, RunStatus
from runs.results.services import run_create
from tests.factories import make_dataset

ITEMS = [
    {"id": "a", "input": "What is 1 + 2?", "expected": "3", "metadata": {"t": 1}},
    {"id": "=b", "input": {"question": '2, "quoted"\nline'}, "expected": None},
    {"id": "c", "input": "What is 1 - 4.5?", "expected": "-3.5"},
]
SCORERS = ["exact_match", {"kind": "includes", "name": "contains"}]


def _record(item: Item, epoch: int, **fields: Any) -> ResultRecord:
    now = timezone.now()
    values: dict[str, Any] = {
        "status": "succeeded",
        "output": None,
        "attempts": [{"number": 1, "outcome": "ok"}],
        "started_at": now - timedelta(seconds=1),
        "finished_at": now,
    }
    values.update(fields)
    return ResultRecord(item_id=item.pk, item_index=item.index, epoch=epoch, **values)


def _scores(exact: bool, contains: bool | str) -> list[ScoreRecord]:
    """Both scorers' verdicts; a string is the error of an errored score."""
    scores = []
    for name, passed in (("exact_match", exact), ("contains", contains)):
        if isinstance(passed, str):
            scores.append(
                ScoreRecord(scorer=name, value=None, passed=None, error=passed)
            )
        else:
            scores.append(ScoreRecord(scorer=name, value=float(passed), passed=passed))
    return scores


def exported_run(project: Project, user: User | None = None) -> Run:
    """Six results (3 items x 2 epochs), stored out of dataset order."""
    dataset = make_dataset(project, ITEMS, name="export")
    run = run_create(
        user=user,
        dataset=dataset,
        target_kind="python",
        target_config={"callable": "runs.targets.examples.echo"},
        scorers=SCORERS,
        options={"epochs": 2},
        name="Export me",
        launch=False,
    )
    a, b, c = Item.objects.filter(dataset=dataset).order_by("index")
    records = [
        _record(c, 1, output=-3.5, scores=_scores(True, True)),
        _record(c, 0, output="-2+3", scores=_scores(False, True)),
        _record(
            a,
            0,
            output="3",
            latency_ms=12.5,
            prompt_tokens=10,
            completion_tokens=2,
            cost=0.001,
            scores=_scores(True, True),
        ),
        _record(
            a,
            1,
            output="=cmd|' /C calc'!A0",
            scores=_scores(False, "judge timed out"),
        ),
        _record(
            b,
            0,
            status="failed",
            error_kind="permanent",
            error_type="HTTP 400",
            error_message="bad request (req_8f3a) at https://api.example/v1",
            attempts=[{"number": n, "outcome": "error"} for n in (1, 2, 3)],
        ),
        _record(
            b,
            1,
            status="timed_out",
            error_kind="timeout",
            error_type="TimeoutError",
            error_message="no answer within 5 s",
        ),
    ]
    results_write(run.pk, records)
    Run.objects.filter(pk=run.pk).update(
        status=RunStatus.COMPLETED_WITH_ERRORS,
        started_at=timezone.now(),
        finished_at=timezone.now(),
    )
    run.refresh_from_db()
    return run
