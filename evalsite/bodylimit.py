"""Request bodies: refused by size before they are read, and never held whole.

Two limits (settings): ``EVALSITE_MAX_REQUEST_BYTES`` for everyone and
``EVALSITE_MAX_ANONYMOUS_REQUEST_BYTES`` for a request without a valid session
or API key. Large bodies are refused with 413 (JSON under /api/, a short page
elsewhere) from their Content-Length before any of them is read; a body
without one (chunked, or HTTP/2 with no length) is counted as it arrives and
cut at the anonymous limit, lifted to the other once it gets there if the
request's key or session is real.

``BodyLimit`` wraps the Django application and works under any ASGI server,
through the ASGI interface alone. What it can promise depends on the server:
an ASGI application sees a request only once the server hands it over, and
Daphne does that only after it has read the whole body. Under Daphne alone, a
10 GB anonymous upload would be read and written to a temporary file before
the 413, a large form body would be parsed whole in memory, and the body
would be copied whole into memory for the application. Neither Daphne nor
Twisted has a public hook or option for any of that (Twisted's
``parsePOSTFormSubmission`` argument is public, but Daphne makes the requests
itself), so ``install_under_daphne`` wraps three Twisted request methods of
Daphne's request class and Daphne's ``Server.create_application``, and reads a
few private attributes. pyproject.toml pins both packages to the versions this
was tested with, and tests/test_http_body_limit_internals.py fails, naming
what to check, when any of those internals changes. Under Daphne:

- Twisted parses every form body (multipart or url-encoded) whole into
  ``request.args``, in memory and on the event loop, although Daphne never
  uses them: a 200 MB multipart POST took 2 GB and stalled the server for
  seconds, whoever sent it. That parsing is switched off;
- Twisted reads a whole request body into a temporary file before Daphne
  starts the application, so the size check by headers also happens there,
  when the headers have arrived, and the connection is closed unread (with
  no "100 Continue" after the 413). A body over the anonymous limit with a
  key or a session cookie waits, unread (the connection paused), until a
  worker thread has checked that the key or the session is real: a made-up
  one is refused as anonymous;
- Daphne then copies that whole file into the application's input queue in
  8 KB messages, in one go on the event loop (for 200 MB, 25,600 messages held
  in memory at once). Instead, the application reads the file lazily, a chunk
  at a time, in a worker thread.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import close_old_connections

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

# Scope extension under which the Daphne integration hands over the body file.
BODY_FILE_EXTENSION = "evalsite.body_file"
FILE_CHUNK = 1024 * 1024

logger = logging.getLogger(__name__)


def limits() -> tuple[int, int]:
    """(limit for everyone, limit without a session or key), in bytes."""
    return (
        settings.EVALSITE_MAX_REQUEST_BYTES,
        settings.EVALSITE_MAX_ANONYMOUS_REQUEST_BYTES,
    )


def refusal(path: str, limit: int, *, anonymous: bool) -> tuple[bytes, bytes]:
    """The body and content type of a 413 answer for ``path``."""
    if anonymous:
        detail = (
            f"request bodies over {limit:,} bytes need a signed-in session "
            "or an API key"
        )
    else:
        detail = f"the request body is over the limit of {limit:,} bytes"
    if path.startswith("/api/"):
        return json.dumps({"detail": detail}).encode(), b"application/json"
    page = (
        "<!doctype html><html lang=en><meta charset=utf-8>"
        "<title>Request too large</title><h1>Request too large</h1>"
        f"<p>{detail.capitalize()}.</p></html>"
    )
    return page.encode(), b"text/html; charset=utf-8"


def has_credentials(headers: dict[bytes, bytes]) -> bool:
    """Whether the request carries a bearer key or a session cookie at all."""
    if headers.get(b"authorization", b"").lower().startswith(b"bearer "):
        return True
    cookie_name = settings.SESSION_COOKIE_NAME.encode()
    return cookie_name + b"=" in headers.get(b"cookie", b"")


def credentials_valid(headers: dict[bytes, bytes]) -> bool:
    """Whether the bearer key or the session cookie belongs to an active user.

    Only decides whether reading a large body is worth it: the view checks
    authentication and permissions fully afterwards.
    """
    from http.cookies import CookieError, SimpleCookie
    from importlib import import_module

    from django.contrib.auth import SESSION_KEY, get_user_model

    from runs.projects.services import api_key_authenticate

    close_old_connections()
    try:
        authorization = headers.get(b"authorization", b"").decode("latin-1")
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            return api_key_authenticate(token.strip(), note_use=False) is not None
        cookie = SimpleCookie()
        try:
            cookie.load(headers.get(b"cookie", b"").decode("latin-1"))
        except CookieError:
            return False
        morsel = cookie.get(settings.SESSION_COOKIE_NAME)
        if morsel is None:
            return False
        engine = import_module(settings.SESSION_ENGINE)
        user_id = engine.SessionStore(morsel.value).get(SESSION_KEY)
        if user_id is None:
            return False
        users = get_user_model()._default_manager
        return users.filter(pk=user_id, is_active=True).exists()
    finally:
        close_old_connections()


class BodyLimit:
    """ASGI middleware that enforces the body limits before the application reads."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        limit, anonymous_limit = limits()
        declared = _content_length(headers)
        if declared is not None and declared > limit:
            await _refuse(send, scope["path"], limit, anonymous=False)
            return
        if (
            declared is not None
            and declared > anonymous_limit
            and not await _verified(headers)
        ):
            await _refuse(send, scope["path"], anonymous_limit, anonymous=True)
            return
        exchange = _LimitedExchange(self.app, scope, receive, send)
        if declared is None:
            # A body without a declared length (chunked, or HTTP/2 without
            # Content-Length) is held to the anonymous limit while it arrives;
            # the credentials are checked only if it grows past that, so a
            # signed-in GET costs no database query.
            exchange.limit, exchange.anonymous = anonymous_limit, True
            exchange.lift_to = limit if has_credentials(headers) else None
        else:
            exchange.limit = limit
        await exchange.run()


async def _verified(headers: dict[bytes, bytes]) -> bool:
    return has_credentials(headers) and await sync_to_async(
        credentials_valid, thread_sensitive=False
    )(headers)


def _content_length(headers: dict[bytes, bytes]) -> int | None:
    raw = headers.get(b"content-length")
    if raw is None:
        return None
    try:
        return max(int(raw), 0)
    except ValueError:
        return None


async def _refuse(send: Send, path: str, limit: int, *, anonymous: bool) -> None:
    body, content_type = refusal(path, limit, anonymous=anonymous)
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [
                (b"content-type", content_type),
                (b"content-length", str(len(body)).encode()),
                (b"cache-control", b"no-store"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class _LimitedExchange:
    """One request: counts the body as the application reads it."""

    def __init__(
        self,
        app: ASGIApp,
        scope: Scope,
        receive: Receive,
        send: Send,
    ) -> None:
        self.app, self.scope = app, scope
        self._receive, self._send = receive, send
        self.body_file = scope.get("extensions", {}).get(BODY_FILE_EXTENSION)
        self.limit = 0
        # Whether the limit is the anonymous one, and the limit that valid
        # credentials would lift it to (None: no credentials to check).
        self.anonymous = False
        self.lift_to: int | None = None
        self.dropped_placeholder = False
        self.received = 0
        self.exceeded = False
        self.started = False

    async def run(self) -> None:
        await self.app(self.scope, self.receive, self.send)
        if self.exceeded and not self.started:
            await _refuse(
                self._send, self.scope["path"], self.limit, anonymous=self.anonymous
            )

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.started = True
        await self._send(message)

    async def receive(self) -> Message:
        if self.exceeded:
            return {"type": "http.disconnect"}
        if self.body_file is not None:
            message = await self._from_file()
        else:
            message = await self._receive()
        if message["type"] == "http.request":
            self.received += len(message.get("body", b""))
            if self.received > self.limit and self.lift_to is not None:
                lift_to, self.lift_to = self.lift_to, None
                if await _verified(dict(self.scope["headers"])):
                    self.limit, self.anonymous = lift_to, False
            if self.received > self.limit:
                # The application stops reading at a disconnect; the answer
                # is sent once it has returned.
                self.exceeded = True
                return {"type": "http.disconnect"}
        return message

    async def _from_file(self) -> Message:
        body_file, self.body_file = self.body_file, None
        if not self.dropped_placeholder:
            # Daphne queued one empty message in place of the body: drop it.
            self.dropped_placeholder = True
            await self._receive()
        if isinstance(body_file, io.BytesIO):  # Twisted keeps small bodies in memory
            chunk = _read(body_file)
        else:
            chunk = await asyncio.to_thread(_read, body_file)
        self.body_file = body_file if len(chunk) == FILE_CHUNK else None
        more = self.body_file is not None
        return {"type": "http.request", "body": chunk, "more_body": more}


def _read(body_file: Any) -> bytes:
    try:
        return body_file.read(FILE_CHUNK)
    except ValueError:  # closed: the connection went away
        return b""


# -- Daphne ---------------------------------------------------------------------


def install_under_daphne() -> None:
    """Refuse oversized bodies in Twisted and hand bodies over lazily (idempotent)."""
    from daphne.http_protocol import WebRequest
    from daphne.server import Server
    from twisted.internet.threads import deferToThread

    if getattr(WebRequest, "_evalsite_body_limit", False):
        return
    WebRequest._evalsite_body_limit = True
    original_got_length = WebRequest.gotLength
    original_chunk = WebRequest.handleContentChunk
    original_received = WebRequest.requestReceived
    original_create = Server.create_application

    def gotLength(self: Any, length: int | None) -> None:
        original_got_length(self, length)
        # Twisted would parse a form body whole into ``request.args``, on the
        # event loop, before Daphne starts the application (which never reads
        # them): 200 MB of multipart took 2 GB and stalled every request.
        self._parsePOSTFormSubmission = False
        limit, anonymous_limit = limits()
        headers = {
            name.lower(): values[0]
            for name, values in self.requestHeaders.getAllRawHeaders()
        }
        self._evalsite_anonymous = not has_credentials(headers)
        self._evalsite_allowed = anonymous_limit if self._evalsite_anonymous else limit
        self._evalsite_received = 0
        self._evalsite_held = None
        self._evalsite_received_call = None
        if length is not None and length > self._evalsite_allowed:
            _refuse_in_twisted(self)
        elif not self._evalsite_anonymous and (
            length is None or length > anonymous_limit
        ):
            _hold_until_verified(self, headers, anonymous_limit, length)

    def handleContentChunk(self: Any, data: bytes) -> None:
        if getattr(self, "_evalsite_refused", False):
            return
        if self._evalsite_held is not None:
            # Only what one read brought: the connection is paused again.
            self._evalsite_held.append(data)
            self.channel._networkProducer.pauseProducing()
            return
        self._evalsite_received += len(data)
        if self._evalsite_received > self._evalsite_allowed:
            _refuse_in_twisted(self)
            return
        original_chunk(self, data)

    def requestReceived(self: Any, command: bytes, path: bytes, version: bytes) -> None:
        if getattr(self, "_evalsite_refused", False):
            return
        if self._evalsite_held is not None:  # a small body that came whole
            self._evalsite_received_call = (command, path, version)
            return
        original_received(self, command, path, version)

    def _hold_until_verified(
        request: Any,
        headers: dict[bytes, bytes],
        anonymous_limit: int,
        length: int | None,
    ) -> None:
        request._evalsite_held = []
        request.channel._networkProducer.pauseProducing()
        checked = deferToThread(credentials_valid, headers)
        checked.addErrback(_unverified)
        checked.addCallback(_verified, request, anonymous_limit, length)

    def _verified(
        valid: bool, request: Any, anonymous_limit: int, length: int | None
    ) -> None:
        held, request._evalsite_held = request._evalsite_held, None
        channel = request.channel
        if request._disconnected or channel is None:
            return
        if not valid:
            request._evalsite_anonymous = True
            request._evalsite_allowed = anonymous_limit
            if length is not None:
                _refuse_in_twisted(request)
                return
        for chunk in held:
            handleContentChunk(request, chunk)
        if getattr(request, "_evalsite_refused", False):
            return
        if request._evalsite_received_call is not None:
            requestReceived(request, *request._evalsite_received_call)
        # While the request is handled, Twisted resumes reading when it is done.
        if not channel._waitingForTransport and not channel._handlingRequest:
            channel._networkProducer.resumeProducing()

    def create_application(self: Any, protocol: Any, scope: Scope) -> Any:
        content = getattr(protocol, "content", None)
        if scope.get("type") == "http" and content is not None:
            scope = {
                **scope,
                "extensions": {
                    **scope.get("extensions", {}),
                    BODY_FILE_EXTENSION: content,
                },
            }
            protocol.content = _HandedOver(content)
        return original_create(self, protocol, scope)

    WebRequest.gotLength = gotLength
    WebRequest.handleContentChunk = handleContentChunk
    WebRequest.requestReceived = requestReceived
    Server.create_application = create_application


def _unverified(failure: Any) -> bool:
    """A check that failed (the database away): the request counts as anonymous."""
    logger.warning(
        "could not check a request's credentials: %s", failure.getErrorMessage()
    )
    return False


def _refuse_in_twisted(request: Any) -> None:
    """Answer 413 on the raw connection and close it, reading no more."""
    request._evalsite_refused = True
    # Refused from the headers, the request must not be answered "100 Continue"
    # too: Twisted sends that after gotLength when the client expects it, and
    # it would follow the 413 on the connection (which curl, for one, expects
    # for any body over 1 MB).
    request.requestHeaders.removeHeader(b"Expect")
    channel = request.channel
    path = getattr(channel, "_path", b"/").decode("latin-1")
    body, content_type = refusal(
        path, request._evalsite_allowed, anonymous=request._evalsite_anonymous
    )
    channel.transport.write(
        b"HTTP/1.1 413 Request Entity Too Large\r\n"
        b"Content-Type: " + content_type + b"\r\n"
        b"Content-Length: " + str(len(body)).encode() + b"\r\n"
        b"Connection: close\r\n\r\n" + body
    )
    # Whatever of the body is still buffered goes nowhere.
    channel.rawDataReceived = lambda data: None
    channel.loseConnection()


class _HandedOver:
    """Stands in for the body file in Daphne once the application reads it."""

    def __init__(self, content: Any) -> None:
        self._content = content

    @property
    def closed(self) -> bool:
        return self._content.closed

    def read(self, size: int = -1) -> bytes:
        return b""

    def seek(self, *args: Any) -> int:
        return 0

    def close(self) -> None:
        self._content.close()
