"""Django's ASGI handler, with one switch to a worker thread per request.

Django's own ``ASGIHandler`` runs the middleware chain in async mode. Every
middleware written as ``MiddlewareMixin`` (all of Django's, and most others)
then moves to a thread and back for ``process_request`` and again for
``process_response``, and a sync-only one (WhiteNoise) also hops back to the
event loop for the rest of the chain: about 15 switches for one page, each
waiting for the GIL while the loop serves other requests. Each request also
gets a new thread (``ThreadSensitiveContext``), hence a new database
connection.

Here the whole request runs synchronously, the way a WSGI server runs it: the
``request_started`` signal, the middleware chain (loaded in sync mode), the
view, the template and, for a complete response, ``response.close()`` with
``request_finished``; all in ONE call to a small pool of long-lived threads
that keep their database connections (``CONN_MAX_AGE``). Only sending the
response happens on the event loop. A streaming response is closed after it
is sent, as Django does.

Django's own handler reads a synchronous streaming body whole into a list
before sending any of it. Here such a body (an export of a run, for instance)
is read on a thread of its own, in batches of about ``STREAM_BATCH_BYTES``,
each sent before the next is read: memory stays flat and a slow download
holds none of the pool's threads. That thread is also where the response is
closed and its database connection released.

A view that is a coroutine function (one that waits on the network, such as
sending one request to a target) is the exception: in that one thread it would
hold a worker for as long as it waits. Its request goes through Django's own
async handler instead (``AsyncViewHandler``): the middleware chain in async
mode, the view on the event loop, no worker thread held while it waits.

The rule that follows, enforced here and by tests/test_http_performance_shape.py:
every entry of ``MIDDLEWARE`` must be able to run synchronously. Code that must
act before Django reads the request (a body-size limit, for instance) belongs
in ASGI middleware around this application in ``evalsite/asgi.py``, which costs
no thread switch.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from typing import Any, cast

import django
from asgiref.sync import iscoroutinefunction, sync_to_async
from django.conf import settings
from django.core import signals
from django.core.exceptions import ImproperlyConfigured, RequestAborted
from django.core.handlers import base
from django.core.handlers.asgi import ASGIHandler, get_script_prefix
from django.db import connections
from django.http import FileResponse, HttpResponseBase, StreamingHttpResponse
from django.urls import Resolver404, get_resolver, set_script_prefix
from django.utils.module_loading import import_string

Receive = Any
Send = Any
Scope = dict[str, Any]

# How much of a synchronous streaming body is read per trip to its thread.
STREAM_BATCH_BYTES = 64 * 1024


class _RequestProcessed(Exception):
    pass


class SyncChainASGIHandler(ASGIHandler):
    """Serve each request in one synchronous call on a pool of worker threads."""

    def __init__(self, *, threads: int | None = None) -> None:
        base.BaseHandler.__init__(self)
        refuse_async_only_middleware(settings.MIDDLEWARE)
        self.load_middleware(is_async=False)
        self.executor = ThreadPoolExecutor(
            max_workers=threads or settings.EVALSITE_HTTP_THREADS,
            thread_name_prefix="evalsite-http",
        )
        self._respond_in_thread = sync_to_async(
            self._respond, thread_sensitive=False, executor=self.executor
        )
        self.async_views = AsyncViewHandler()

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        if serves_async_view(scope):
            await self.async_views(scope, receive, send)
            return
        try:
            body_file = await self.read_body(receive)
        except RequestAborted:
            return
        with closing(body_file):
            response = await self._respond_in_thread(scope, body_file)
            body = _ThreadedBody.wrap(response)
            try:
                async with asyncio.TaskGroup() as tasks:
                    tasks.create_task(self.listen_for_disconnect(receive))
                    await self.send_response(response, send)
                    raise _RequestProcessed
            except* (_RequestProcessed, RequestAborted):
                pass
            if body is not None:
                await body.close_response(fallback=self.executor)
            elif response.streaming:
                await sync_to_async(
                    response.close, thread_sensitive=False, executor=self.executor
                )()

    def _respond(self, scope: Scope, body_file: Any) -> HttpResponseBase:
        """Everything Django does for one request, on one worker thread."""
        set_script_prefix(get_script_prefix(scope))
        signals.request_started.send(sender=self.__class__, scope=scope)
        request, refused = self.create_request(scope, body_file)
        response = refused if request is None else self.get_response(request)
        assert response is not None  # create_request answers a request or a response
        # As Django's own handlers mark their responses.
        response._handler_class = self.__class__  # type: ignore[attr-defined]  # see above
        if isinstance(response, FileResponse):
            # The ASGI server chunks the body itself: read the file in big blocks.
            response.block_size = self.chunk_size
        if not response.streaming:
            # The body is in memory: release the request's resources (and the
            # database connection, through request_finished) on this thread.
            response.close()
        return response


def serves_async_view(scope: Scope) -> bool:
    """Whether the request's URL leads to a view that is a coroutine function."""
    path = scope["path"]
    prefix = get_script_prefix(scope).rstrip("/")
    if prefix and path.startswith(prefix):
        path = path.removeprefix(prefix)
    if len(path) > CACHED_PATH_LENGTH:
        return _async_view_at(path)
    return _async_view_at_cached(path)


def _async_view_at(path: str) -> bool:
    try:
        match = get_resolver().resolve(path or "/")
    except Resolver404:
        return False
    return iscoroutinefunction(match.func)


# Resolving a path costs about 60 us on the event loop; a page's path repeats.
# Short paths only: the cache's memory stays small whatever is requested.
CACHED_PATH_LENGTH = 256
_async_view_at_cached = functools.lru_cache(maxsize=4096)(_async_view_at)


class AsyncViewHandler(ASGIHandler):
    """Django's async handler, for coroutine views.

    Its sync middleware runs on a thread of the request's own, which ends with
    the request: so does that thread's database connection, closed here.
    """

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().handle(scope, receive, send)
        finally:
            await sync_to_async(connections.close_all)()


class _ThreadedBody:
    """A synchronous streaming body, read on one thread of its own.

    A database cursor opened by the body's iterator stays on that thread
    (connections belong to threads), and the response is closed there.
    """

    def __init__(self, response: StreamingHttpResponse) -> None:
        self.response = response
        # wrap() hands over sync bodies only.
        self.parts = cast(Iterator[bytes], response.streaming_content)
        self.executor: ThreadPoolExecutor | None = None

    @classmethod
    def wrap(cls, response: HttpResponseBase) -> _ThreadedBody | None:
        """Make the response's sync body an async one read on its own thread.

        Files are left as they are: Django reads them in a worker thread.
        """
        if (
            not isinstance(response, StreamingHttpResponse)
            or response.is_async
            or isinstance(response, FileResponse)
        ):
            return None
        body = cls(response)
        response.streaming_content = body
        return body

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._batches()

    async def _batches(self) -> AsyncIterator[bytes]:
        loop = asyncio.get_running_loop()
        self.executor = ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="evalsite-stream"
        )
        done = False
        while not done:
            batch, done = await loop.run_in_executor(self.executor, self._read)
            if batch:
                yield batch

    def _read(self) -> tuple[bytes, bool]:
        batch: list[bytes] = []
        size = 0
        for part in self.parts:
            batch.append(part)
            size += len(part)
            if size >= STREAM_BATCH_BYTES:
                return b"".join(batch), False
        return b"".join(batch), True

    async def close_response(self, *, fallback: ThreadPoolExecutor) -> None:
        """Close the response on the thread that read it (or on ``fallback``
        if no byte was read), then release that thread."""
        if self.executor is None:
            await sync_to_async(
                self.response.close, thread_sensitive=False, executor=fallback
            )()
            return
        try:
            await asyncio.get_running_loop().run_in_executor(self.executor, self._close)
        finally:
            self.executor.shutdown(wait=False)

    def _close(self) -> None:
        try:
            self.response.close()
        finally:
            # The thread ends here: its connection would be left open.
            connections.close_all()


def refuse_async_only_middleware(paths: list[str]) -> None:
    """Fail at start-up on a middleware that cannot run synchronously."""
    for path in paths:
        middleware = import_string(path)
        if not getattr(middleware, "sync_capable", True):
            raise ImproperlyConfigured(
                f"MIDDLEWARE: {path} cannot run synchronously. Pages run their "
                "whole middleware chain in one worker thread (evalsite/handlers.py);"
                " put async-only code in ASGI middleware in evalsite/asgi.py."
            )


def get_asgi_application() -> SyncChainASGIHandler:
    """Like ``django.core.asgi.get_asgi_application``, with the handler above."""
    django.setup(set_prefix=False)
    return SyncChainASGIHandler()
