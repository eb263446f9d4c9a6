"""Keep-alive HTTP/1.1 connections for the calls of targets and judges.

A request to a model endpoint is small and its answer comes whole: what it
needs of a client is a connection kept open between calls, one write of the
request and the answer's bytes parsed as they come. aiohttp's client builds a
request, a response, a parser and a stream reader per call and reschedules a
timer on every read, which cost more CPU per item than the executor's own
work; this pool keeps a connection (an asyncio protocol with llhttp's parser,
through ``httptools``) per call in flight and reuses it.

What it keeps of the client it replaces (``policy_session``):

- the network policy, checked on the resolved address at connect time by the
  same resolver (``PolicyResolver``), and on a literal address before any
  connection: a refusal is ``PolicyRefused``;
- no proxy (the environment's would hide the destination from the policy),
  no redirect followed, no decoding (``PolicyClient`` decodes the answer);
- the timeouts of the backstop: the whole connection set-up, each address's
  connect, and the longest silence while an answer is awaited (checked by one
  sweep a pool, not a timer per read); idle connections closed after
  ``IDLE_SECONDS``, as aiohttp's keep-alive does;
- network errors named as aiohttp names them (``ClientConnectorError``,
  ``ServerDisconnectedError``, ...), so that stored error types do not change.

An answer over ``MAX_ANSWER_BYTES`` (or a head over ``MAX_HEAD_BYTES``) is
refused and its connection closed. A connection is closed, never reused, after
any error, a cancelled call (the executor's per-attempt timeout), an answer
that says ``Connection: close`` or one read until the server closed.
"""

from __future__ import annotations

import asyncio
import functools
import importlib.metadata
import os
import re
import socket
import ssl
import sys
from collections.abc import Iterable
from typing import Any, cast

import httptools

from runs.calls.netpolicy import NetworkPolicy, PolicyResolver, parse_ip

RawHeaders = tuple[tuple[bytes, bytes], ...]
MAX_ANSWER_BYTES = 64 * 1024 * 1024
MAX_HEAD_BYTES = 64 * 1024
IDLE_SECONDS = 15.0
# What aiohttp sends unless told otherwise (the answer is decoded by httpx),
# but its User-Agent (``default_headers``).
DEFAULT_HEADERS = ((b"Accept", b"*/*"), (b"Accept-Encoding", b"gzip, deflate"))
_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_BAD_VALUE = re.compile(rb"[\r\n\x00]")
DEFAULT_PORTS = {"http": 80, "https": 443}
# Methods sent with a Content-Length even without a body, as aiohttp does.
WITH_BODY = frozenset({"POST", "PUT", "PATCH"})


class CallError(Exception):
    """A network failure of one call: ``error_type`` names it as aiohttp would."""

    def __init__(self, error_type: str, message: str) -> None:
        super().__init__(message)
        self.error_type = error_type
        # As an aiohttp error is said (``network_error_message``): a failed
        # connection in words, anything else with its type.
        self.message = (
            message
            if error_type.startswith("ClientConnector")
            else f"{error_type}: {message}"
        )


def connect_failure(host: str, port: int | None, error: OSError) -> str:
    """A failed connection as a person reads it: "cannot connect to h:p
    (connection refused)"."""
    reason = os.strerror(error.errno) if error.errno else ""
    if isinstance(error, socket.gaierror) or not reason:
        reason = error.strerror or str(error) or type(error).__name__
    return f"cannot connect to {host}:{port} ({reason.lower()})"


def host_line(scheme: str, raw_host: bytes, port: int | None) -> bytes:
    """The Host header of a URL, as a request line."""
    host = b"[" + raw_host + b"]" if b":" in raw_host else raw_host
    if port is not None and port != DEFAULT_PORTS[scheme]:
        host += b":%d" % port
    return b"Host: %s\r\n" % host


@functools.cache
def default_headers() -> tuple[tuple[bytes, bytes], ...]:
    """``DEFAULT_HEADERS`` and the User-Agent aiohttp sends
    (``aiohttp.http.SERVER_SOFTWARE``), found without importing aiohttp:
    its import (with two TLS contexts made from the system's certificates)
    was a fifth of the instructions of evalrun's start-up (bench/README.md)."""
    version = importlib.metadata.version("aiohttp")
    agent = f"Python/{sys.version_info[0]}.{sys.version_info[1]} aiohttp/{version}"
    return (*DEFAULT_HEADERS, (b"User-Agent", agent.encode()))


def header_lines(headers: Iterable[tuple[bytes, bytes]]) -> bytes:
    """Request lines of the headers, after aiohttp's defaults they do not
    replace; Host and Content-Length are the request's own.

    A header name that is not a token or a value with a line break is a
    ValueError (aiohttp refuses them too): a header must not start another.
    """
    given = {name.lower(): (name, value) for name, value in default_headers()}
    for name, value in headers:
        if not _TOKEN.fullmatch(name) or _BAD_VALUE.search(value):
            raise ValueError(f"invalid HTTP header {name!r}")
        if name.lower() not in (b"host", b"content-length"):
            given[name.lower()] = (name, value)
    return b"".join(b"%s: %s\r\n" % pair for pair in given.values())


class Connection(asyncio.Protocol):
    """One keep-alive connection: at most one request in flight."""

    def __init__(self, pool: Pool, key: tuple[str, str, int]) -> None:
        self.pool = pool
        self.key = key
        self.parser = httptools.HttpResponseParser(self)
        self.transport: asyncio.Transport | None = None
        self.waiter: asyncio.Future[tuple[int, RawHeaders, bytes]] | None = None
        self.headers: list[tuple[bytes, bytes]] = []
        self.body: list[bytes] = []
        self.size = 0
        self.head_size = 0
        self.began = False  # some of the answer came
        self.until_close = False  # no length: the body ends when the server closes
        self.last_read = 0.0
        self.idle_since = 0.0
        self.closed = False

    # -- asyncio's side --------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are asyncio's in all but their classes.
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        if self.waiter is None:
            self.close()  # nothing was asked: a server that sends unasked
            return
        self.last_read = self.pool.loop.time()
        self.began = True
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserCallbackError:
            pass  # the callback closed the connection and said why
        except (httptools.HttpParserError, httptools.HttpParserUpgrade) as exc:
            self.fail(CallError("ClientResponseError", f"invalid HTTP answer: {exc}"))

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.pool.forget(self)
        if self.waiter is None:
            return
        if exc is None and self.until_close and self.parser.get_status_code():
            self.answer()
        elif isinstance(exc, OSError):
            self.fail(CallError("ClientOSError", str(exc)))
        elif self.began:
            self.fail(
                CallError("ClientPayloadError", "Response payload is not completed")
            )
        else:
            self.fail(CallError("ServerDisconnectedError", "Server disconnected"))

    # -- the parser's side -----------------------------------------------------

    def on_message_begin(self) -> None:
        if self.waiter is None:  # a second answer to one request
            self.close()
            raise ValueError("an answer nothing asked for")

    def on_header(self, name: bytes, value: bytes) -> None:
        self.head_size += len(name) + len(value) + 4
        if self.head_size > MAX_HEAD_BYTES:
            self.refuse(f"the answer's headers are over {MAX_HEAD_BYTES:,} bytes")
            raise ValueError("too large")  # stops the parser
        self.headers.append((name, value))

    def on_headers_complete(self) -> None:
        status = self.parser.get_status_code()
        if status < 200 or status in (204, 304):
            return
        for name, value in self.headers:
            lowered = name.lower()
            if lowered == b"content-length":
                return
            if lowered == b"transfer-encoding" and b"chunked" in value.lower():
                return
        self.until_close = True

    def on_body(self, body: bytes) -> None:
        self.size += len(body)
        if self.size > MAX_ANSWER_BYTES:
            self.refuse(f"the answer is over {MAX_ANSWER_BYTES:,} bytes")
            raise ValueError("too large")
        self.body.append(body)

    def on_message_complete(self) -> None:
        if self.parser.get_status_code() < 200:  # 100 Continue and the like
            self.headers, self.body, self.size, self.head_size = [], [], 0, 0
            return
        self.answer()

    # -- a call ----------------------------------------------------------------

    async def call(self, data: bytes) -> tuple[int, RawHeaders, bytes]:
        assert self.transport is not None
        waiter = self.waiter = self.pool.loop.create_future()
        self.last_read = self.pool.loop.time()
        self.transport.write(data)
        try:
            return await waiter
        except BaseException:
            self.close()  # cancelled or failed: never reused
            raise

    def answer(self) -> None:
        waiter, status = self.waiter, self.parser.get_status_code()
        result = (status, tuple(self.headers), b"".join(self.body))
        keep = not self.until_close and self.parser.should_keep_alive()
        self.waiter, self.headers, self.body = None, [], []
        self.size = self.head_size = 0
        self.began = False
        if waiter is not None and not waiter.done():
            waiter.set_result(result)
        if keep and not self.closed:
            self.pool.release(self)
        else:
            self.close()

    def fail(self, error: BaseException) -> None:
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(error)
        self.close()

    def refuse(self, message: str) -> None:
        self.fail(CallError("AnswerTooLarge", message))

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.pool.forget(self)
            # A client closed from another event loop than its own (each
            # async_to_sync has one) leaves the socket to the transport's
            # finaliser once its loop is gone.
            if self.transport is not None and not self.pool.loop.is_closed():
                self.transport.abort()


class Pool:
    """Keep-alive connections by origin, for one client in one event loop."""

    def __init__(
        self,
        policy: NetworkPolicy,
        *,
        connect_timeout: float,
        read_timeout: float,
        setup_timeout: float,
    ) -> None:
        self.policy = policy
        self.resolver = PolicyResolver(policy)
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self.setup_timeout = setup_timeout
        self.loop = asyncio.get_running_loop()
        self.idle: dict[tuple[str, str, int], list[Connection]] = {}
        self.busy: set[Connection] = set()
        self.sweep: asyncio.TimerHandle | None = None
        self.sweep_every = min(1.0, read_timeout / 4, IDLE_SECONDS / 4)
        self.tls: ssl.SSLContext | None = None
        self.closed = False

    async def request(
        self, key: tuple[str, str, int], head: bytes, body: bytes | None
    ) -> tuple[int, RawHeaders, bytes]:
        """Send ``head`` (``request_head``) and the body on a connection to
        ``key`` (scheme, host, port); the answer's status, headers and body."""
        connection = None
        idle = self.idle.get(key)
        while idle:
            connection = idle.pop()
            if not connection.closed:
                break
            connection = None
        if connection is None:
            connection = await self.connect(key)
        self.busy.add(connection)
        if self.sweep is None:
            self.sweep = self.loop.call_later(self.sweep_every, self.sweeping)
        if body is None:
            data = head + b"\r\n"
        else:
            data = b"%sContent-Length: %d\r\n\r\n%s" % (head, len(body), body)
        return await connection.call(data)

    def release(self, connection: Connection) -> None:
        self.busy.discard(connection)
        connection.idle_since = self.loop.time()
        self.idle.setdefault(connection.key, []).append(connection)

    def forget(self, connection: Connection) -> None:
        self.busy.discard(connection)
        idle = self.idle.get(connection.key)
        if idle and connection in idle:
            idle.remove(connection)

    def sweeping(self) -> None:
        """Fail calls silent for longer than the read timeout; close
        connections idle for longer than ``IDLE_SECONDS``."""
        now = self.loop.time()
        for connection in list(self.busy):
            if now - connection.last_read > self.read_timeout:
                connection.fail(
                    CallError(
                        "SocketTimeoutError", "Timeout on reading data from socket"
                    )
                )
        for idle in list(self.idle.values()):
            for connection in list(idle):
                if now - connection.idle_since > IDLE_SECONDS:
                    connection.close()
        self.idle = {key: idle for key, idle in self.idle.items() if idle}
        self.sweep = None
        if self.busy or self.idle:
            self.sweep = self.loop.call_later(self.sweep_every, self.sweeping)

    async def connect(self, key: tuple[str, str, int]) -> Connection:
        scheme, host, port = key
        try:
            async with asyncio.timeout(self.setup_timeout):
                return await self.open(scheme, host, port)
        except TimeoutError:
            raise CallError(
                "ConnectionTimeoutError", f"Connection timeout to host {host}:{port}"
            ) from None

    async def open(self, scheme: str, host: str, port: int) -> Connection:
        literal = parse_ip(host)
        if literal is not None:
            self.policy.check(host, literal)
            addresses: list[Any] = [{"host": host.strip("[]"), "port": port}]
        else:
            try:
                addresses = await self.resolver.resolve(host, port, socket.AF_UNSPEC)
            except OSError as exc:
                raise CallError(
                    "ClientConnectorDNSError", connect_failure(host, port, exc)
                ) from exc
        tls = None
        if scheme == "https":
            if self.tls is None:
                self.tls = await self.loop.run_in_executor(None, tls_context)
            tls = self.tls
        failure: CallError | None = None
        for address in addresses:
            try:
                async with asyncio.timeout(self.connect_timeout):
                    _, connection = await self.loop.create_connection(
                        lambda: Connection(self, (scheme, host, port)),
                        address["host"],
                        address["port"],
                        ssl=tls,
                        server_hostname=host.strip("[]") if tls else None,
                    )
            except TimeoutError:
                failure = CallError(
                    "ConnectionTimeoutError",
                    f"Connection timeout to host {host}:{port}",
                )
            except ssl.SSLCertVerificationError as exc:
                failure = CallError("ClientConnectorCertificateError", str(exc))
            except ssl.SSLError as exc:
                failure = CallError("ClientConnectorSSLError", str(exc))
            except OSError as exc:
                failure = CallError(
                    "ClientConnectorError", connect_failure(host, port, exc)
                )
            else:
                return connection
        assert failure is not None
        raise failure

    async def aclose(self) -> None:
        self.closed = True
        if self.sweep is not None:
            self.sweep.cancel()
            self.sweep = None
        for connection in [*self.busy, *(c for i in self.idle.values() for c in i)]:
            connection.close()
        self.idle.clear()
        self.busy.clear()
        await self.resolver.close()


def tls_context() -> ssl.SSLContext:
    """What aiohttp verifies with: the system's certificates, HTTP/1.1 by ALPN."""
    context = ssl.create_default_context()
    context.set_alpn_protocols(["http/1.1"])
    return context
