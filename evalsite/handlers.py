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

The rule that follows, enforced here and by tests/test_http_performance_shape.py:
every entry of ``MIDDLEWARE`` must be able to run synchronously. Code that must
act before Django reads the request (a body-size limit, for instance) belongs
in ASGI middleware around this application in ``evalsite/asgi.py``, which costs
no thread switch.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from typing import Any

import django
from asgiref.sync import sync_to_async
from django.conf import settings
from django.core import signals
from django.core.exceptions import ImproperlyConfigured, RequestAborted
from django.core.handlers import base
from django.core.handlers.asgi import ASGIHandler, get_script_prefix
from django.http import FileResponse, HttpResponseBase
from django.urls import set_script_prefix
from django.utils.module_loading import import_string

Receive = Any
Send = Any
Scope = dict[str, Any]


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

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            body_file = await self.read_body(receive)
        except RequestAborted:
            return
        with closing(body_file):
            response = await self._respond_in_thread(scope, body_file)
            try:
                async with asyncio.TaskGroup() as tasks:
                    tasks.create_task(self.listen_for_disconnect(receive))
                    await self.send_response(response, send)
                    raise _RequestProcessed
            except* (_RequestProcessed, RequestAborted):
                pass
            if response.streaming:
                await sync_to_async(
                    response.close, thread_sensitive=False, executor=self.executor
                )()

    def _respond(self, scope: Scope, body_file: Any) -> HttpResponseBase:
        """Everything Django does for one request, on one worker thread."""
        set_script_prefix(get_script_prefix(scope))
        signals.request_started.send(sender=self.__class__, scope=scope)
        request, response = self.create_request(scope, body_file)
        if request is not None:
            response = self.get_response(request)
        response._handler_class = self.__class__
        if isinstance(response, FileResponse):
            # The ASGI server chunks the body itself: read the file in big blocks.
            response.block_size = self.chunk_size
        if not response.streaming:
            # The body is in memory: release the request's resources (and the
            # database connection, through request_finished) on this thread.
            response.close()
        return response


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
