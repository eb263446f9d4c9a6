"""Live progress over the websocket: refusal, snapshot, updates and polling."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable

import pytest
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from evalsite.asgi import application
from runs import consumers
from runs.consumers import RunConsumer
from runs.events import RUN_UPDATE, publish_run_update, run_group
from runs.executor import store
from runs.executor.store import ResultRecord, ScoreRecord
from runs.models import Dataset, Item, Result, Run, RunStatus
from runs.results.services import run_create, run_launch
from tests.installations import database_written

pytestmark = pytest.mark.django_db(transaction=True)

Headers = list[tuple[bytes, bytes]]


@pytest.fixture
def headers_for(db: None) -> Callable[[User | None], Headers]:
    """Websocket headers of a browser logged in as ``user`` (or anonymous)."""

    def build(user: User | None) -> Headers:
        headers = [(b"origin", b"http://testserver")]
        if user is not None:
            client = Client()
            client.force_login(user)
            session = client.cookies["sessionid"].value
            headers.append((b"cookie", f"sessionid={session}".encode()))
        return headers

    return build


def _run(dataset: Dataset, **config: object) -> Run:
    return run_create(
        user=None,
        dataset=dataset,
        target_kind="demo",
        target_config={
            "min_latency_ms": 0,
            "max_latency_ms": 0,
            "transient_error_rate": 0,
            **config,
        },
        scorers=["exact_match"],
        launch=False,
    )


@pytest.fixture
def run(dataset: Dataset) -> Run:
    return _run(dataset)


def _store(run: Run, indexes: list[int]) -> None:
    """Write results the way an executor does, without announcing them."""
    now = timezone.now()
    records = [
        ResultRecord(
            item_id=item.pk,
            item_index=item.index,
            epoch=0,
            status=Result.Status.SUCCEEDED,
            output=f"out-{item.index}",
            attempts=[{"number": 1, "outcome": "ok"}],
            started_at=now,
            finished_at=now,
            scores=[ScoreRecord("exact_match", 1.0, True, reason="ok")],
        )
        for item in Item.objects.filter(dataset=run.dataset, index__in=indexes)
    ]
    store.results_write(run.pk, records)


store_results = database_sync_to_async(_store)


async def _connect(headers: Headers, run: Run) -> WebsocketCommunicator:
    communicator = WebsocketCommunicator(
        application, f"/ws/runs/{run.pk}/", headers=headers
    )
    connected, _ = await communicator.connect()
    assert connected
    return communicator


# How long a test waits for a message it expects. A ceiling on waiting for
# state, not a figure under test: the first snapshot of a process compiles
# its templates, which took about 10 s on a machine loaded by other work.
MESSAGE_WAIT = 30


async def _receive(
    communicator: WebsocketCommunicator, wait: float = MESSAGE_WAIT
) -> str:
    """The next update: a progress message and the rows message that follows it."""
    messages = [await communicator.receive_from(timeout=wait)]
    while not await communicator.receive_nothing(timeout=0.3):
        messages.append(await communicator.receive_from())
    return "\n".join(messages)


def _processed(message: str) -> int:
    """The processed count in the last progress block of ``message``."""
    counts = re.findall(r'data-processed="(\d+)"', message)
    assert counts, message
    return int(counts[-1])


def _row_ids(message: str) -> list[int]:
    return [int(i) for i in re.findall(r'data-result-id="(\d+)"', message)]


async def test_an_outsider_is_refused(
    headers_for: Callable[[User | None], Headers], mallory: User, run: Run
) -> None:
    headers = await database_sync_to_async(headers_for)(mallory)
    communicator = WebsocketCommunicator(
        application, f"/ws/runs/{run.pk}/", headers=headers
    )

    connected, _ = await communicator.connect()

    assert not connected
    await communicator.disconnect()


async def test_an_anonymous_visitor_is_refused(
    headers_for: Callable[[User | None], Headers], run: Run
) -> None:
    communicator = WebsocketCommunicator(
        application, f"/ws/runs/{run.pk}/", headers=headers_for(None)
    )

    connected, _ = await communicator.connect()

    assert not connected
    await communicator.disconnect()


async def test_a_member_first_receives_a_snapshot(
    headers_for: Callable[[User | None], Headers], victor: User, run: Run
) -> None:
    await store_results(run, [0, 1, 2])
    headers = await database_sync_to_async(headers_for)(victor)
    communicator = await _connect(headers, run)

    snapshot = await _receive(communicator)

    assert '<section id="run-progress"' in snapshot
    assert 'hx-swap-oob="true"' in snapshot
    assert _processed(snapshot) == 3
    assert '<tbody id="live-rows" hx-swap-oob="true">' in snapshot
    assert len(_row_ids(snapshot)) == 3
    await communicator.disconnect()


async def test_an_event_brings_new_counts_and_only_new_rows(
    headers_for: Callable[[User | None], Headers], bob: User, run: Run
) -> None:
    await store_results(run, [0])
    headers = await database_sync_to_async(headers_for)(bob)
    communicator = await _connect(headers, run)
    snapshot = await _receive(communicator)

    await store_results(run, [1, 2])
    await publish_run_update(run.pk)
    progress = await communicator.receive_from(timeout=MESSAGE_WAIT)
    rows = await communicator.receive_from(timeout=MESSAGE_WAIT)
    update = progress + rows

    assert _processed(update) == 3
    # Rows travel alone, so that the HTML parser starts in a table context.
    assert rows.startswith('<tbody hx-swap-oob="afterbegin:#live-rows">')
    assert "data-result-id" not in progress
    new_ids = _row_ids(update)
    assert len(new_ids) == 2
    assert not set(new_ids) & set(_row_ids(snapshot))
    assert new_ids == sorted(new_ids, reverse=True)  # newest first
    await communicator.disconnect()


async def test_a_late_page_gets_the_newest_rows_then_every_later_one(
    headers_for: Callable[[User | None], Headers],
    bob: User,
    run: Run,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A page that connects after more results than a snapshot holds gets the
    # newest of them, then each later one: the rows it shows are the run's
    # newest, with none missing between them and none twice.
    monkeypatch.setattr(consumers, "SNAPSHOT_ROWS", 3)
    await store_results(run, [0, 1, 2, 3, 4])
    headers = await database_sync_to_async(headers_for)(bob)
    communicator = await _connect(headers, run)
    snapshot = _row_ids(await _receive(communicator))

    await store_results(run, [5, 6, 7])
    await publish_run_update(run.pk)
    later = _row_ids(await _receive(communicator))

    stored = await database_sync_to_async(
        lambda: list(Result.objects.filter(run=run).values_list("pk", flat=True))
    )()
    assert len(snapshot) == 3
    assert later + snapshot == sorted(stored, reverse=True)[:6]
    await communicator.disconnect()


async def test_polling_brings_changes_made_without_an_event(
    headers_for: Callable[[User | None], Headers], bob: User, run: Run
) -> None:
    headers = await database_sync_to_async(headers_for)(bob)
    communicator = await _connect(headers, run)
    assert _processed(await _receive(communicator)) == 0

    await store_results(run, [4, 5])  # as an executor in another process would
    update = await _receive(communicator)

    assert _processed(update) == 2
    assert len(_row_ids(update)) == 2
    await communicator.disconnect()


async def test_polling_sends_nothing_when_nothing_changed(
    headers_for: Callable[[User | None], Headers], bob: User, run: Run
) -> None:
    headers = await database_sync_to_async(headers_for)(bob)
    communicator = await _connect(headers, run)
    await _receive(communicator)

    assert await communicator.receive_nothing(timeout=4)
    await communicator.disconnect()


async def test_a_run_of_another_installation_sharing_the_redis_is_not_heard(
    headers_for: Callable[[User | None], Headers],
    bob: User,
    run: Run,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two installations (or two test suites) on one Redis each have a run
    with this id: the other's events must not reach this page, which would
    send an update for each (and end its following on the other's end)."""
    # Events only: a poll would bring our update below without our event.
    monkeypatch.setattr(RunConsumer, "poll_interval", 3600.0)
    headers = await database_sync_to_async(headers_for)(bob)
    communicator = await _connect(headers, run)
    await _receive(communicator)
    with database_written(NAME="another_installation"):  # its database
        theirs = run_group(run.pk)

    layer = get_channel_layer()
    for final in (False, True):
        await layer.group_send(
            theirs, {"type": RUN_UPDATE, "run_id": run.pk, "final": final}
        )

    assert await communicator.receive_nothing(timeout=2), "heard the other's run"
    await store_results(run, [0])
    await publish_run_update(run.pk)  # ours is heard, and the page still follows
    assert _processed(await _receive(communicator)) == 1
    await communicator.disconnect()


async def test_a_finished_run_gets_one_snapshot_and_no_polling(
    headers_for: Callable[[User | None], Headers], bob: User, dataset: Dataset
) -> None:
    run = await database_sync_to_async(_run)(dataset)
    await Run.objects.filter(pk=run.pk).aupdate(status=RunStatus.CANCELLED)
    headers = await database_sync_to_async(headers_for)(bob)
    communicator = await _connect(headers, run)

    snapshot = await _receive(communicator)
    await store_results(run, [0])  # would be noticed by a poller

    assert 'data-final="true"' in snapshot
    assert await communicator.receive_nothing(timeout=3)
    await communicator.disconnect()


async def test_a_real_run_is_followed_to_its_final_status(
    headers_for: Callable[[User | None], Headers], bob: User, run: Run
) -> None:
    headers = await database_sync_to_async(headers_for)(bob)
    communicator = await _connect(headers, run)
    seen = [await _receive(communicator)]

    # From the test's own loop, not a sync_to_async worker, whose context
    # variables the executor task would otherwise inherit.
    run_launch(run=run)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 30
    while 'data-final="true"' not in seen[-1]:
        assert loop.time() < deadline, "no final update"
        seen.append(await _receive(communicator))

    final = seen[-1]
    assert _processed(final) == 10
    assert 'data-status="completed' in final
    rows = {row for message in seen for row in _row_ids(message)}
    assert len(rows) == 10
    await communicator.disconnect()


FLOOD = 2_000


async def _flood(run: Run, *, final: bool = False, count: int = FLOOD) -> None:
    """Events straight onto the channel layer, as many executors would send
    them: no pacing by the publisher."""
    layer = get_channel_layer()
    event = {"type": RUN_UPDATE, "run_id": run.pk, "final": final}
    for _ in range(count):
        await layer.group_send(run_group(run.pk), event)


async def test_a_flood_of_events_waits_for_the_interval_and_the_end_goes_at_once(
    headers_for: Callable[[User | None], Headers],
    bob: User,
    run: Run,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(RunConsumer, "send_interval", 3600.0, raising=False)
    monkeypatch.setattr(RunConsumer, "poll_interval", 3600.0)
    headers = await database_sync_to_async(headers_for)(bob)
    communicator = await _connect(headers, run)
    snapshot = await _receive(communicator, wait=60)

    for index in range(10):  # every item stored, each announced by a flood
        await store_results(run, [index])
        await _flood(run, count=FLOOD // 10)
    flooded = await communicator.receive_nothing(timeout=1)
    await database_sync_to_async(store.run_finish)(run.pk, cancelled=False)
    await _flood(run, final=True, count=1)
    end = await _receive(communicator, wait=60)

    assert _processed(snapshot) == 0
    assert flooded, "an update came before its interval had passed"
    # One update, read after the end: the exact final figures and every row.
    assert end.count('<section id="run-progress"') == 1
    assert 'data-final="true"' in end
    assert _processed(end) == 10
    assert len(_row_ids(end)) == 10
    assert await communicator.receive_nothing(timeout=1)
    await communicator.disconnect()


async def test_the_last_state_of_a_flood_reaches_the_page_once(
    headers_for: Callable[[User | None], Headers],
    bob: User,
    run: Run,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(RunConsumer, "poll_interval", 3600.0)  # events only
    headers = await database_sync_to_async(headers_for)(bob)
    communicator = await _connect(headers, run)
    await _receive(communicator, wait=60)

    for index in range(10):  # the last item stored, then only events
        await store_results(run, [index])
        await _flood(run, count=FLOOD // 10)
    progress = []
    while not progress or _processed(progress[-1]) < 10:
        message = await communicator.receive_from(timeout=60)
        if "run-progress" in message:
            progress.append(message)

    # The flood yields to the loop between events, so its updates follow
    # the send interval: far fewer than its events (one each, before).
    assert len(progress) < FLOOD // 10, len(progress)
    await communicator.disconnect()
