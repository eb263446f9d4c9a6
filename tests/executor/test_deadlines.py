"""An attempt's deadline behaves as ``asyncio.timeout``: the attempt under
way is cancelled into a TimeoutError at its own deadline, however many
attempts its task made before; any other cancel stays a cancel."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from runs.executor.deadlines import attempt_deadline

SHORT = 0.05  # seconds: the deadline of an attempt that hangs
GUARD = 30  # seconds: only a broken deadline comes near this


async def hang() -> None:
    await asyncio.Event().wait()


async def test_a_hung_attempt_ends_in_a_timeout_error():
    with pytest.raises(TimeoutError):
        async with attempt_deadline(SHORT):
            await hang()
    assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]


async def test_after_many_quick_attempts_a_hung_one_still_times_out():
    for _ in range(200):
        async with attempt_deadline(SHORT):
            await asyncio.sleep(0)
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(GUARD):  # the outer one must not be what fires
            async with attempt_deadline(SHORT):
                await hang()


async def test_a_shorter_deadline_after_a_longer_one_is_kept():
    async with attempt_deadline(3600):
        await asyncio.sleep(0)
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(GUARD):
            async with attempt_deadline(SHORT):
                await hang()


async def test_an_attempt_that_ends_in_time_is_not_cancelled_later():
    async with attempt_deadline(SHORT):
        await asyncio.sleep(0)
    # Past the first deadline, with no attempt under way: nothing is cancelled.
    await asyncio.sleep(SHORT * 3)
    task = asyncio.current_task()
    assert task is not None and task.cancelling() == 0


async def test_another_cancel_during_an_attempt_stays_a_cancel():
    started = asyncio.Event()

    async def attempt() -> None:
        async with attempt_deadline(3600):
            started.set()
            await hang()

    task = asyncio.create_task(attempt())
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_a_target_that_swallows_the_cancel_leaves_none_pending():
    async with attempt_deadline(SHORT):
        # A target that ignores the cancel, and answers.
        with contextlib.suppress(asyncio.CancelledError):
            await hang()
    await asyncio.sleep(0)  # no cancel left to be delivered here
    task = asyncio.current_task()
    assert task is not None and task.cancelling() == 0


async def test_a_task_made_during_an_attempt_has_a_deadline_of_its_own():
    async def child() -> None:
        async with attempt_deadline(SHORT):
            await hang()

    async with attempt_deadline(3600):
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(asyncio.create_task(child()), GUARD)
        await asyncio.sleep(0)  # the parent's attempt goes on, uncancelled
