"""Shards of a distributed run: claims, ends and ranges (shard_store.py)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from runs.executor import shard_store, store
from runs.executor.store import Pulse
from runs.models import Project, Run, RunShard, RunStatus
from tests.factories import arithmetic_items, echo_run, make_dataset, store_outcomes


@pytest.fixture
def run(project: Project) -> Run:
    return echo_run(make_dataset(project, arithmetic_items(10)))


def shards(run: Run, *ranges: tuple[int, int]) -> list[RunShard]:
    made = shard_store.shards_replace(run.pk, list(ranges))
    assert made is not None
    return made


@pytest.mark.django_db
def test_run_ends_once_with_its_last_shard(run: Run) -> None:
    first, second = shards(run, (0, 5), (5, 10))
    assert shard_store.shard_claim(first.pk) is not None
    assert shard_store.shard_claim(second.pk) is not None
    store_outcomes(run, [{}] * 5)

    assert shard_store.shard_finish(first.pk, run_id=run.pk, cancelled=False) == (
        RunStatus.RUNNING
    )
    run.refresh_from_db()
    assert run.status == RunStatus.RUNNING and run.finished_at is None

    store_outcomes(run, [{}] * 5, offset=5)
    assert shard_store.shard_finish(second.pk, run_id=run.pk, cancelled=False) == (
        RunStatus.COMPLETED
    )
    run.refresh_from_db()
    ended_at = run.finished_at
    # The same shard's job ending twice (a retried job) ends nothing again.
    assert shard_store.shard_finish(second.pk, run_id=run.pk, cancelled=False) == (
        RunStatus.COMPLETED
    )
    run.refresh_from_db()
    assert run.finished_at == ended_at
    assert run.processed + run.skipped == run.total == 10


@pytest.mark.django_db
def test_a_shard_error_fails_the_run_when_its_last_shard_ends(run: Run) -> None:
    first, second = shards(run, (0, 5), (5, 10))
    shard_store.shard_claim(first.pk)
    shard_store.shard_claim(second.pk)
    store_outcomes(run, [{}] * 10)
    shard_store.shard_finish(first.pk, run_id=run.pk, cancelled=False, error="boom")
    status = shard_store.shard_finish(second.pk, run_id=run.pk, cancelled=False)
    run.refresh_from_db()
    assert status == RunStatus.FAILED
    assert run.error == "boom"


@pytest.mark.django_db
def test_ranges_hold_only_items_that_need_work(run: Run) -> None:
    store_outcomes(run, [{}] * 4)  # items 0-3 have their result
    store_outcomes(run, [{}] * 2, offset=6)  # and 6-7
    assert shard_store.shard_ranges(run.pk, size=3) == [(4, 9), (9, 10)]
    assert shard_store.shard_ranges(run.pk, size=10) == [(4, 10)]


@pytest.mark.django_db
def test_no_new_shards_while_some_are_executing(run: Run) -> None:
    (only,) = shards(run, (0, 10))
    shard_store.shard_claim(only.pk)
    assert shard_store.shards_replace(run.pk, [(0, 5), (5, 10)]) is None
    assert list(RunShard.objects.filter(run=run)) == [only]


@pytest.mark.django_db
def test_a_cancelled_run_refuses_claims_and_ends_when_nothing_runs(run: Run) -> None:
    first, second = shards(run, (0, 5), (5, 10))
    first.job_id, second.job_id = 11, 12
    RunShard.objects.bulk_update([first, second], ["job_id"])
    Run.objects.filter(pk=run.pk).update(cancel_requested=True)

    assert shard_store.shard_claim(first.pk) is None
    jobs, final = shard_store.shards_cancel(run.pk)
    assert sorted(jobs) == [11, 12]
    assert final == RunStatus.CANCELLED
    run.refresh_from_db()
    assert run.skipped == 10
    assert set(RunShard.objects.values_list("status", flat=True)) == {"cancelled"}


@pytest.mark.django_db
def test_cancel_leaves_the_end_to_running_shards(run: Run) -> None:
    first, _ = shards(run, (0, 5), (5, 10))
    shard_store.shard_claim(first.pk)
    Run.objects.filter(pk=run.pk).update(cancel_requested=True)
    _, final = shard_store.shards_cancel(run.pk)
    assert final is None  # the running shard stops, then ends the run
    status = shard_store.shard_finish(first.pk, run_id=run.pk, cancelled=True)
    assert status == RunStatus.CANCELLED


@pytest.mark.django_db
def test_handed_back_shard_is_claimed_again_by_another_worker(run: Run) -> None:
    (only,) = shards(run, (0, 10))
    shard_store.shard_claim(only.pk, executor_id="host:1:a")
    assert shard_store.shard_release(only.pk, executor_id="host:1:a")
    only.refresh_from_db()
    assert only.status == RunShard.Status.PENDING and only.worker == ""
    assert shard_store.shard_claim(only.pk, executor_id="host:2:b") is not None
    only.refresh_from_db()
    assert (only.worker, only.claims) == ("host:2:b", 2)


@pytest.mark.django_db
def test_heartbeats_of_shards_add_up_on_the_run(run: Run) -> None:
    first, second = shards(run, (0, 5), (5, 10))
    shard_store.shard_claim(first.pk, executor_id="host:1:a")
    shard_store.shard_claim(second.pk, executor_id="host:2:b")
    shard_store.shard_heartbeat(
        first.pk, run_id=run.pk, pulse=Pulse(in_flight=3), executor_id="host:1:a"
    )
    shard_store.shard_heartbeat(
        second.pk, run_id=run.pk, pulse=Pulse(in_flight=4), executor_id="host:2:b"
    )
    run.refresh_from_db()
    assert run.in_flight == 7
    assert run.alive
    assert run.executor_id == ""  # no worker holds the whole run


@pytest.mark.django_db
def test_an_executor_whose_shard_was_taken_over_does_not_end_it(run: Run) -> None:
    (only,) = shards(run, (0, 10))
    shard_store.shard_claim(only.pk, executor_id="host:1:a")
    shard_store.shard_claim(only.pk, executor_id="host:2:b")  # a. was stalled
    status = shard_store.shard_finish(
        only.pk, run_id=run.pk, cancelled=False, executor_id="host:1:a"
    )
    assert status == RunStatus.RUNNING
    only.refresh_from_db()
    assert (only.status, only.worker) == (RunShard.Status.RUNNING, "host:2:b")
    store_outcomes(run, [{}] * 10)
    status = shard_store.shard_finish(
        only.pk, run_id=run.pk, cancelled=False, executor_id="host:2:b"
    )
    assert status == RunStatus.COMPLETED


@pytest.mark.django_db
def test_a_cancelled_run_whose_shards_no_worker_executes_ends(run: Run) -> None:
    lost, handed_back = shards(run, (0, 5), (5, 10))
    shard_store.shard_claim(lost.pk, executor_id="host:1:a")
    shard_store.shard_claim(handed_back.pk, executor_id="host:2:b")
    shard_store.shard_release(handed_back.pk, executor_id="host:2:b")
    Run.objects.filter(pk=run.pk).update(cancel_requested=True)
    assert shard_store.shards_settle_stalled(stale_seconds=60) == []  # a. beats

    RunShard.objects.filter(pk=lost.pk).update(heartbeat_at=None)  # a. died
    assert shard_store.shards_settle_stalled(stale_seconds=60) == [run.pk]
    run.refresh_from_db()
    assert run.status == RunStatus.CANCELLED


@pytest.mark.django_db
def test_an_ended_run_gets_no_new_shards(run: Run) -> None:
    Run.objects.filter(pk=run.pk).update(status=RunStatus.CANCELLED)
    assert shard_store.shards_replace(run.pk, [(0, 10)]) is None
    assert not RunShard.objects.filter(run=run).exists()


@pytest.mark.django_db
def test_a_silent_workers_shard_holds_nothing_in_flight(run: Run, settings) -> None:
    first, second = shards(run, (0, 5), (5, 10))
    shard_store.shard_claim(first.pk, executor_id="host:1:a")
    shard_store.shard_claim(second.pk, executor_id="host:2:b")
    shard_store.shard_heartbeat(
        first.pk, run_id=run.pk, pulse=Pulse(in_flight=3), executor_id="host:1:a"
    )
    # The first worker dies: its last heartbeat ages past the stall threshold.
    RunShard.objects.filter(pk=first.pk).update(
        heartbeat_at=timezone.now()
        - timedelta(seconds=settings.EVALSITE_STALL_SECONDS + 1)
    )

    shard_store.shard_heartbeat(
        second.pk, run_id=run.pk, pulse=Pulse(in_flight=4), executor_id="host:2:b"
    )

    run.refresh_from_db()
    assert run.in_flight == 4


@pytest.mark.django_db
def test_a_handed_back_shard_holds_nothing_in_flight(run: Run) -> None:
    (only,) = shards(run, (0, 10))
    shard_store.shard_claim(only.pk, executor_id="host:1:a")
    shard_store.shard_heartbeat(
        only.pk, run_id=run.pk, pulse=Pulse(in_flight=5), executor_id="host:1:a"
    )

    shard_store.shard_release(only.pk, executor_id="host:1:a")

    only.refresh_from_db()
    assert only.in_flight == 0


FAIL_FAST = "stopped early: 12 of 20 items failed (60%, fail-fast threshold 50%)"


@pytest.mark.django_db
def test_a_shard_that_stops_the_run_stops_its_other_running_shards(run: Run) -> None:
    first, second = shards(run, (0, 5), (5, 10))
    shard_store.shard_claim(first.pk, executor_id="host:1:a")
    shard_store.shard_claim(second.pk, executor_id="host:2:b")
    before = shard_store.shard_heartbeat(
        second.pk, run_id=run.pk, executor_id="host:2:b"
    )

    shard_store.shard_finish(
        first.pk,
        run_id=run.pk,
        cancelled=False,
        error=FAIL_FAST,
        executor_id="host:1:a",
    )
    after = shard_store.shard_heartbeat(
        second.pk, run_id=run.pk, executor_id="host:2:b"
    )

    assert before == shard_store.RunSignal()
    assert after == shard_store.RunSignal(stopped=FAIL_FAST)
    run.refresh_from_db()
    assert run.status == RunStatus.RUNNING  # it ends with its last shard


@pytest.mark.django_db
def test_a_stopped_runs_pending_shard_is_not_claimed_and_ends_the_run_once(
    run: Run,
) -> None:
    first, second = shards(run, (0, 5), (5, 10))
    shard_store.shard_claim(first.pk)
    store_outcomes(run, [{"error": ("http", "HTTPStatusError", "400")}] * 5)
    shard_store.shard_finish(first.pk, run_id=run.pk, cancelled=False, error=FAIL_FAST)

    assert shard_store.shard_claim(second.pk) is None
    assert shard_store.shard_settle(second.pk) == RunStatus.FAILED
    run.refresh_from_db()
    ended_at = run.finished_at
    # Its job run again (a retry) ends nothing twice.
    assert shard_store.shard_claim(second.pk) is None
    assert shard_store.shard_settle(second.pk) is None

    run.refresh_from_db()
    assert (run.status, run.error) == (RunStatus.FAILED, FAIL_FAST)
    assert run.finished_at == ended_at
    assert (run.processed, run.skipped, run.total) == (5, 5, 10)
    second.refresh_from_db()
    assert (second.status, second.claims) == (RunShard.Status.STOPPED, 0)


@pytest.mark.django_db
def test_a_later_shards_error_does_not_replace_the_first(run: Run) -> None:
    first, second = shards(run, (0, 5), (5, 10))
    shard_store.shard_claim(first.pk)
    shard_store.shard_claim(second.pk)
    shard_store.shard_finish(first.pk, run_id=run.pk, cancelled=False, error=FAIL_FAST)

    status = shard_store.shard_finish(
        second.pk,
        run_id=run.pk,
        cancelled=False,
        error="executor error: RuntimeError: it broke while stopping",
    )

    run.refresh_from_db()
    assert (status, run.error) == (RunStatus.FAILED, FAIL_FAST)


@pytest.mark.django_db
def test_a_cost_budget_drain_does_not_stop_the_other_shards(run: Run) -> None:
    first, second, third = shards(run, (0, 4), (4, 8), (8, 10))
    shard_store.shard_claim(first.pk, executor_id="host:1:a")
    shard_store.shard_claim(second.pk, executor_id="host:2:b")
    shard_store.shard_finish(
        first.pk,
        run_id=run.pk,
        cancelled=False,
        error="cost budget of $0.01 reached",
        drained=True,
        executor_id="host:1:a",
    )

    heard = shard_store.shard_heartbeat(
        second.pk, run_id=run.pk, executor_id="host:2:b"
    )

    assert heard == shard_store.RunSignal()
    assert shard_store.shard_claim(third.pk) is not None


@pytest.mark.django_db
def test_a_resumed_run_is_not_stopped_by_its_old_stop(run: Run) -> None:
    from runs.retry.resume import run_resume

    first, second = shards(run, (0, 5), (5, 10))
    shard_store.shard_claim(first.pk)
    store_outcomes(run, [{}] * 5)
    shard_store.shard_finish(first.pk, run_id=run.pk, cancelled=False, error=FAIL_FAST)
    shard_store.shard_settle(second.pk)
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED

    run_resume(run=run, user=None, launch=False)
    (again,) = shards(run, *shard_store.shard_ranges(run.pk, size=5))

    assert shard_store.shard_claim(again.pk) is not None
    assert shard_store.run_signal(run.pk) == shard_store.RunSignal()
    assert shard_store.shard_heartbeat(again.pk, run_id=run.pk) == (
        shard_store.RunSignal()
    )


@pytest.mark.django_db
def test_the_run_backs_off_as_far_as_its_most_throttled_live_shard(
    run: Run,
) -> None:
    first, second, third = shards(run, (0, 4), (4, 8), (8, 10))
    for shard in (first, second, third):
        shard_store.shard_claim(shard.pk)
    # The last to beat is not backing off.
    for shard, limit in ((first, 4), (second, 2), (third, None)):
        shard_store.shard_heartbeat(
            shard.pk, run_id=run.pk, pulse=Pulse(throttle_limit=limit)
        )
    run.refresh_from_db()
    assert run.throttle_limit == 2

    # The tightest shard ends: the run backs off as far as the others now.
    shard_store.shard_finish(second.pk, run_id=run.pk, cancelled=False)
    shard_store.shard_heartbeat(third.pk, run_id=run.pk)
    run.refresh_from_db()
    assert run.throttle_limit == 4


@pytest.mark.django_db
def test_a_heartbeat_records_every_figure_of_its_pulse(run: Run) -> None:
    pulse = Pulse(throttle_limit=3, in_flight=7, call_latency=1.5)
    assert store.run_claim(run.pk) is not None
    assert store.run_heartbeat(run.pk, pulse=pulse) is False
    run.refresh_from_db()
    assert (run.throttle_limit, run.in_flight, run.call_latency) == (3, 7, 1.5)

    (shard,) = shards(run, (0, 10))
    shard_store.shard_claim(shard.pk)
    shard_store.shard_heartbeat(shard.pk, run_id=run.pk, pulse=Pulse(in_flight=2))
    shard.refresh_from_db()
    run.refresh_from_db()
    assert (shard.throttle_limit, shard.in_flight, shard.call_latency) == (
        None,
        2,
        None,
    )
    assert (run.throttle_limit, run.in_flight, run.call_latency) == (None, 2, None)
