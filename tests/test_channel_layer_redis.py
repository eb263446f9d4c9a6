"""The Redis channel layer keeps a live page's socket when Redis answers late.

A socket's consumer waits for its run's events in BZPOPMIN calls that block
5 s on the server. With redis-py's default read timeout (also 5 s), an answer
a moment late raised TimeoutError in the consumer and closed the page's
socket, as seen on a loaded machine. These run in the PostgreSQL pass, where
``REDIS_URL`` puts the channel layer in Redis.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
from channels_redis.core import RedisChannelLayer
from django.conf import settings

# How late the stand-in for a busy Redis delivers each answer.
ANSWER_DELAY = 1.5
# A ceiling on waiting for the layer's calls, not a figure under test.
WAIT = 60


class LateRedis:
    """A TCP relay to Redis that passes commands at once and delivers every
    answer ``ANSWER_DELAY`` seconds late, in order; it counts the BZPOPMIN
    calls it has passed."""

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port
        self.blocking_calls = 0
        self.blocked_again = asyncio.Event()  # a second BZPOPMIN came
        self.tasks: set[asyncio.Task[None]] = set()

    async def serve(self, client_in: Any, client_out: Any) -> None:
        server_in, server_out = await asyncio.open_connection(self.host, self.port)
        for pump in (
            self._commands(client_in, server_out),
            self._answers(server_in, client_out),
        ):
            task = asyncio.create_task(pump)
            self.tasks.add(task)

    async def _commands(self, source: Any, sink: Any) -> None:
        while data := await source.read(65536):
            self.blocking_calls += data.upper().count(b"BZPOPMIN")
            if self.blocking_calls >= 2:
                self.blocked_again.set()
            sink.write(data)
            await sink.drain()
        sink.close()

    async def _answers(self, source: Any, sink: Any) -> None:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def deliver() -> None:
            while True:
                arrived, data = await queue.get()
                await asyncio.sleep(max(0.0, arrived + ANSWER_DELAY - loop.time()))
                sink.write(data)
                await sink.drain()

        delivery = asyncio.create_task(deliver())
        self.tasks.add(delivery)
        while data := await source.read(65536):
            queue.put_nowait((loop.time(), data))


@pytest.fixture
async def late_layer() -> AsyncIterator[tuple[RedisChannelLayer, LateRedis]]:
    """The project's channel layer, configured as settings say, reaching Redis
    through ``LateRedis``."""
    if not settings.REDIS_URL:
        pytest.skip("the channel layer is in Redis only with REDIS_URL")
    layers: dict[str, Any] = settings.CHANNEL_LAYERS
    config = dict(layers["default"]["CONFIG"])
    (host,) = config.pop("hosts")
    host = dict(host) if isinstance(host, dict) else {"address": host}
    url = urlsplit(host["address"])
    relay = LateRedis(url.hostname or "127.0.0.1", url.port or 6379)
    server = await asyncio.start_server(relay.serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    host["address"] = urlunsplit(url._replace(netloc=f"127.0.0.1:{port}"))
    layer = RedisChannelLayer(hosts=[host], prefix="late-test", **config)
    yield layer, relay
    await layer.close_pools()
    server.close()
    for task in relay.tasks:
        task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.gather(*relay.tasks, return_exceptions=True)


async def test_a_socket_waiting_for_events_outlasts_late_answers(
    late_layer: tuple[RedisChannelLayer, LateRedis],
) -> None:
    layer, relay = late_layer
    channel = await layer.new_channel()
    receiving = asyncio.create_task(layer.receive(channel))

    # The first blocking call ends empty after 5 s and comes back late; the
    # layer then blocks again, unless that late answer broke the read.
    blocked_again = asyncio.create_task(relay.blocked_again.wait())
    await asyncio.wait(
        {blocked_again, receiving}, timeout=WAIT, return_when=asyncio.FIRST_COMPLETED
    )
    blocked_again.cancel()
    if receiving.done():
        receiving.result()  # raises what ended the wait
    await layer.send(channel, {"type": "run.update", "final": False})

    async with asyncio.timeout(WAIT):
        message = await receiving
    assert message == {"type": "run.update", "final": False}
