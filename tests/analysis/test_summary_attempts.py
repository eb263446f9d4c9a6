"""Time to result and failed attempts: stored per result by the writer, added
up by the summary, shown on the run page and the result page."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from django.db.migrations.executor import MigrationExecutor
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from runs.analysis.summary import run_summary
from runs.executor.store import ResultRecord, results_write
from runs.models import Dataset, Item, Result, Run, RunStatus
from runs.records.rows import retry_mark
from tests.factories import echo_run

T0 = timezone.now() - timedelta(hours=1)


def attempt(
    number: int, start: float, end: float, kind: str = "", **extra: Any
) -> dict[str, Any]:
    """An attempt of the log, ``start`` and ``end`` in seconds after T0."""
    entry: dict[str, Any] = {
        "number": number,
        "started_at": (T0 + timedelta(seconds=start)).isoformat(),
        "finished_at": (T0 + timedelta(seconds=end)).isoformat(),
        "latency_ms": (end - start) * 1000,
        "outcome": "ok" if not kind else "timeout" if kind == "timeout" else "error",
        **extra,
    }
    if kind:
        entry["error_kind"] = kind
    return entry


def record(item: Item, attempts: list[dict[str, Any]]) -> ResultRecord:
    last = attempts[-1]
    answered = last["outcome"] == "ok"
    return ResultRecord(
        item_id=item.pk,
        item_index=item.index,
        epoch=0,
        status=Result.Status.SUCCEEDED if answered else Result.Status.TIMED_OUT,
        output="answer" if answered else None,
        attempts=attempts,
        started_at=T0,
        finished_at=datetime.fromisoformat(last["finished_at"]),
        error_kind="" if answered else last["error_kind"],
        error_type="" if answered else "Timeout",
        error_message="" if answered else "attempt exceeded 60 s",
        latency_ms=last["latency_ms"] if answered else None,
    )


def finished_run(dataset: Dataset, logs: list[list[dict[str, Any]]]) -> Run:
    """A completed run whose items have these attempt logs, stored by the writer."""
    run = echo_run(dataset)
    items = list(Item.objects.filter(dataset=dataset).order_by("index"))
    results_write(
        run.pk, [record(item, log) for item, log in zip(items, logs, strict=False)]
    )
    Run.objects.filter(pk=run.pk).update(status=RunStatus.COMPLETED)
    run.refresh_from_db()
    return run


# A 60 s timeout, 1 s of back-off, then a 22 s answer; and four quick answers.
SLOW = [attempt(1, 0, 60, "timeout"), attempt(2, 61, 83)]
QUICK = [[attempt(1, 0, 0.5)] for _ in range(4)]


def test_the_writer_stores_time_to_result_and_failed_attempts(
    dataset: Dataset,
) -> None:
    run = finished_run(dataset, [SLOW])

    result = Result.objects.get(run=run)

    assert result.latency_ms == pytest.approx(22_000)
    assert result.time_to_result_ms == pytest.approx(83_000)
    assert result.failed_attempts == 1


def test_the_summary_gives_time_to_result_beside_the_last_attempt(
    dataset: Dataset,
) -> None:
    run = finished_run(dataset, [SLOW] * 3 + QUICK)

    summary = run_summary(run=run)

    assert summary.latency_ms["p90"] == pytest.approx(22_000)
    assert summary.time_to_result_ms["p90"] == pytest.approx(83_000)
    assert summary.time_to_result_ms["p50"] == pytest.approx(500)
    assert summary.time_to_result_count == 7


def test_the_summary_counts_failed_attempts_per_kind(dataset: Dataset) -> None:
    transient_then_ok = [attempt(1, 0, 1, "transient"), attempt(2, 3, 4)]
    run = finished_run(dataset, [SLOW, SLOW, transient_then_ok, *QUICK])

    summary = run_summary(run=run)

    assert summary.error_kinds == {}
    assert summary.failed_attempts == 3
    assert summary.attempt_error_kinds == {"timeout": 2, "transient": 1}
    assert summary.retried == 3


def test_the_run_page_never_says_no_errors_when_attempts_failed(
    dataset: Dataset, alice_client: Client
) -> None:
    transient_then_ok = [attempt(1, 0, 1, "transient"), attempt(2, 3, 4)]
    run = finished_run(dataset, [SLOW, SLOW, transient_then_ok, *QUICK])

    page = alice_client.get(reverse("runs:run_detail", args=[run.pk])).content.decode()

    assert "No errors." not in page
    assert (
        "No result failed; 3 attempts failed and were retried: timeout 2, transient 1."
        in page
    )
    assert "Time to result" in page
    assert "83,000 ms" in page  # the p90 of time to result
    assert "22,000 ms" in page  # the p90 of the last attempt


def test_a_failed_result_and_its_attempts_are_both_counted(dataset: Dataset) -> None:
    timed_out = [attempt(1, 0, 60, "timeout"), attempt(2, 61, 121, "timeout")]
    run = finished_run(dataset, [timed_out, SLOW])

    summary = run_summary(run=run)

    assert summary.error_kinds == {"timeout": 1}
    assert summary.failed_attempts == 3
    assert summary.attempt_error_kinds == {"timeout": 3}
    # only answered results are in the percentiles
    assert summary.time_to_result_ms["p50"] == pytest.approx(83_000)


def test_the_result_page_shows_time_to_result_beside_the_last_attempt(
    dataset: Dataset, alice_client: Client
) -> None:
    run = finished_run(dataset, [SLOW])
    result = Result.objects.get(run=run)

    page = alice_client.get(
        reverse("runs:result_detail", args=[run.pk, result.pk])
    ).content.decode()

    assert '<dd id="time-to-result">83000.0 ms' in page
    assert "2 attempts, 1 failed" in page
    assert '<dd id="last-attempt-latency">22000.0 ms</dd>' in page


def test_a_retried_result_times_its_new_round_and_counts_every_failure(
    dataset: Dataset,
) -> None:
    timed_out = [attempt(1, 0, 60, "timeout")]
    run = finished_run(dataset, [timed_out])
    retry_mark(Result.objects.filter(run=run))
    # retried a day later: a transient failure, then an answer
    later = [attempt(1, 86_400, 86_401, "transient"), attempt(2, 86_402, 86_405)]
    items = Item.objects.filter(dataset=dataset).order_by("index")

    results_write(run.pk, [record(items[0], later)])

    result = Result.objects.get(run=run)
    assert result.status == Result.Status.SUCCEEDED
    assert result.time_to_result_ms == pytest.approx(5_000)
    assert result.failed_attempts == 2


BEFORE = [("runs", "0022_admin_names")]
AFTER = [("runs", "0023_result_attempt_figures")]


def test_existing_results_get_their_figures_from_their_attempt_logs(
    migrator: MigrationExecutor,
) -> None:
    migrator.migrate(BEFORE)
    apps = migrator.loader.project_state(BEFORE).apps
    project = apps.get_model("runs", "Project").objects.create(name="p")
    dataset = apps.get_model("runs", "Dataset").objects.create(
        project=project, name="d", item_count=3
    )
    item_model = apps.get_model("runs", "Item")
    items = [
        item_model.objects.create(dataset=dataset, index=i, input="", external_id=i)
        for i in range(3)
    ]
    run = apps.get_model("runs", "Run").objects.create(project=project, dataset=dataset)
    retried = [
        attempt(1, 0, 60, "timeout"),
        {**attempt(2, 100, 101, "transient"), "round": 1},
        {**attempt(3, 102, 105), "round": 1},
    ]
    logs = [SLOW, retried, [{"number": 1}]]  # the last: a log without times
    statuses = ["succeeded", "succeeded", "cancelled"]
    for item, log, status in zip(items, logs, statuses, strict=True):
        apps.get_model("runs", "Result").objects.create(
            run=run,
            item=item,
            item_index=item.index,
            status=status,
            attempts=log,
            started_at=T0,
            finished_at=T0,
        )

    migrator.loader.build_graph()
    migrator.migrate(AFTER)

    stored = list(
        Result.objects.order_by("item_index").values_list(
            "time_to_result_ms", "failed_attempts"
        )
    )
    assert stored == [(83_000, 1), (5_000, 2), (None, 0)]


def test_the_summary_endpoint_gives_time_to_result_and_failed_attempts(
    dataset: Dataset, alice_client: Client
) -> None:
    run = finished_run(dataset, [SLOW, *QUICK])

    body = alice_client.get(f"/api/v1/runs/{run.pk}/summary").json()

    assert body["time_to_result_ms"]["p99"] == pytest.approx(
        500 + 0.96 * (83_000 - 500)
    )
    assert body["time_to_result_ms"]["count"] == 5
    assert body["failed_attempts"] == 1
    assert body["attempt_error_kinds"] == {"timeout": 1}
