"""What the targets that call an HTTP endpoint share.

One way to send a request (through the network policy, checked on the
resolved address at connect time), one way to turn an HTTP error into a
``TargetError`` (transient, quota or permanent, with Retry-After), and one way
to quote an error body without echoing a page. Secrets an endpoint echoes are
replaced where an item's outcome is recorded (``runs.secrets.redaction``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import httpx

from runs.calls.keepalive import (
    DEFAULT_PORTS,
    WITH_BODY,
    CallError,
    Pool,
    header_lines,
    host_line,
)
from runs.calls.netpolicy import PolicyRefused, current_policy
from runs.calls.retry import classify_status, parse_retry_after
from runs.models import ErrorKind
from runs.plugins.targets import TargetError, TargetOutput
from runs.records.json_texts import JsonText

# An error body is kept in the attempt log up to this many characters, and its
# JSON message quoted in the error up to ERROR_MESSAGE_LIMIT: enough to debug a
# provider's error, too little to read a page back through the endpoint.
ERROR_BODY_LIMIT = 4096
ERROR_MESSAGE_LIMIT = 300
# Per-attempt timeouts are the executor's job; this backstop only makes sure
# that no socket outlives its purpose.
BACKSTOP_TIMEOUT = {"connect": 30.0, "read": 600.0, "write": 600.0, "pool": 600.0}
RawHeaders = tuple[tuple[bytes, bytes], ...]
# What httpx sends for json=body (a NaN is a ValueError, as there); made
# once, where json.dumps with options would make an encoder per request.
BODY_ENCODER = JsonText(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
# Headers and URLs a client remembers converted: a target's own, and a few
# made per item (trace headers).
CONVERTED_KEPT = 8


def remember(cache: dict[int, Any], key: int, value: Any) -> None:
    if len(cache) >= CONVERTED_KEPT:
        cache.clear()
    cache[key] = value


class Answer(Protocol):
    """What targets and judges read of an HTTP answer read whole: an
    ``httpx.Response`` is one, and so is a ``PlainAnswer``."""

    status_code: int

    @property
    def headers(self) -> Mapping[str, str]: ...

    @property
    def content(self) -> bytes: ...

    @property
    def text(self) -> str: ...

    def json(self) -> Any: ...


class PlainAnswer:
    """An answer sent as it is (no content coding) in UTF-8, read without an
    ``httpx.Response``: building one and decoding through it was a tenth of
    the executor's time per item. It reads as httpx reads such an answer
    (text decoded with errors replaced, ``json`` from the bytes); any other
    answer is decoded by httpx (``PolicyClient.send``)."""

    __slots__ = ("_headers", "_raw_headers", "_text", "content", "status_code")

    def __init__(
        self, status_code: int, raw_headers: RawHeaders, content: bytes
    ) -> None:
        self.status_code = status_code
        self.content = content
        self._raw_headers = raw_headers
        self._headers: httpx.Headers | None = None
        self._text: str | None = None

    @property
    def headers(self) -> httpx.Headers:
        if self._headers is None:  # only an error's Retry-After reads them
            self._headers = httpx.Headers(self._raw_headers)
        return self._headers

    @property
    def text(self) -> str:
        if self._text is None:
            self._text = self.content.decode("utf-8", errors="replace")
        return self._text

    def json(self) -> Any:
        return json_of(self.content)

    @staticmethod
    def fits(raw_headers: RawHeaders) -> bool:
        """Whether an answer with these headers is plain: no content coding,
        and no charset or UTF-8 (what httpx decodes the same way)."""
        for name, value in raw_headers:
            name = name.lower()
            if name == b"content-encoding":
                if value.strip().lower() not in (b"", b"identity"):
                    return False
            elif name == b"content-type" and b"charset" in value.lower():
                # Any parameter named charset but UTF-8 goes to httpx.
                for parameter in value.lower().split(b";")[1:]:
                    key, _, charset = parameter.partition(b"=")
                    if key.strip() == b"charset" and charset.strip().strip(
                        b"\"'"
                    ) not in (b"utf-8", b"utf8"):
                        return False
        return True


# The C scanner json.loads ends in, without the Python of ``json.loads``
# (the encoding's detection, two whitespace matches, three calls): every
# answer of a run is read with it. (JSONDecoder sets it in __init__; its stub
# does not declare it.)
_scan: Callable[[str, int], tuple[Any, int]]
_scan = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


def json_of(content: bytes) -> Any:
    """``json.loads(content)``, for less in the usual case: an object whose
    first two bytes say UTF-8 to ``json.detect_encoding`` (an opening brace,
    then no NUL), decoded as ``json.loads`` decodes it, with nothing around
    it. Anything else, and every error, is ``json.loads``'s own."""
    if len(content) > 1 and content[0] == 0x7B and content[1]:
        try:
            text = content.decode("utf-8", "surrogatepass")
            found, end = _scan(text, 0)
        except (StopIteration, ValueError):
            pass
        else:
            if end == len(text):
                return found
    return json.loads(content)


def error_summary(response: Answer) -> str:
    """The status line and, from a JSON error body, its message in short.

    The endpoint is chosen by the user, so its error page is never echoed
    whole: a JSON ``error.message`` (or ``message``/``detail``) up to
    ``ERROR_MESSAGE_LIMIT`` characters, printable characters only.
    """
    # The standard phrase, not the server's: a reason phrase can carry anything.
    reason = httpx.codes.get_reason_phrase(response.status_code)
    status = f"HTTP {response.status_code} {reason}".rstrip()
    try:
        data = json.loads(response.content[:ERROR_BODY_LIMIT])
    except ValueError:
        return status
    message: Any = None
    if isinstance(data, dict):
        error = data.get("error")
        message = error.get("message") if isinstance(error, dict) else error
        message = message or data.get("message") or data.get("detail")
    if not isinstance(message, str) or not message.strip():
        return status
    text = "".join(ch if ch.isprintable() else " " for ch in message).strip()
    if len(text) > ERROR_MESSAGE_LIMIT:
        text = text[: ERROR_MESSAGE_LIMIT - 1] + "…"
    return f"{status}: {text}"


def status_error(response: Answer) -> TargetError:
    """The error for a response whose status is not a success."""
    body = response.text
    return TargetError(
        error_summary(response),
        kind=classify_status(response.status_code, body),
        http_status=response.status_code,
        raw_body=body[:ERROR_BODY_LIMIT],
        retry_after=parse_retry_after(response.headers.get("retry-after")),
        error_type=f"HTTP{response.status_code}",
    )


def malformed(
    response: Answer, message: str, *, usage: TargetOutput | None = None
) -> TargetError:
    """An answer the plug-in cannot read: a permanent error, with the body
    kept (up to ERROR_BODY_LIMIT) and what the call used, if known."""
    return TargetError(
        f"malformed response: {message}",
        kind=ErrorKind.PERMANENT,
        http_status=response.status_code,
        raw_body=response.text[:ERROR_BODY_LIMIT],
        error_type="MalformedResponse",
        usage=usage,
    )


class PolicyClient:
    """Sends requests on kept-alive connections (``keepalive.Pool``); answers
    read whole (``Answer``).

    httpx's own connection pool spends milliseconds per request at high
    concurrency, and aiohttp's client builds a request, a response, a parser
    and a stream reader per call: the pool sends one prepared request head
    and the body in one write and reads the answer with llhttp's parser. The
    body is encoded once, as httpx encodes JSON; the raw answer is a
    ``PlainAnswer`` when it needs no decoding but UTF-8's, else (still
    compressed, if it was) an ``httpx.Response``, which decodes it. The
    executor bounds the calls in flight; the pool connects only to the
    addresses the network policy permits, and redirects are never followed.
    """

    def __init__(self) -> None:
        self.policy = current_policy()
        self.pool: Pool | None = None
        # Converted once: a target sends the same URL and headers every time.
        self.plain_headers: dict[int, tuple[httpx.Headers, bytes, bool]] = {}
        self.urls: dict[int, tuple[httpx.URL, tuple[str, str, int], bytes]] = {}

    def headers_for(self, headers: httpx.Headers) -> tuple[bytes, bool]:
        """The headers as request lines, and whether they name a content type.

        Not every target sends the same headers: one that sends trace headers
        makes them per item, so the cache holds a few, not one per request.
        """
        cached = self.plain_headers.get(id(headers))
        if cached is None or cached[0] is not headers:
            lines = header_lines(headers.raw)
            cached = (headers, lines, "content-type" in headers)
            remember(self.plain_headers, id(headers), cached)
        return cached[1], cached[2]

    def url_for(self, url: httpx.URL) -> tuple[tuple[str, str, int], bytes]:
        """Where to connect (scheme, host, port) and the Host line, parsed once."""
        cached = self.urls.get(id(url))
        if cached is None or cached[0] is not url:
            if url.scheme not in ("http", "https") or not url.raw_host:
                raise TargetError(
                    f"cannot send to {url}: not an http:// or https:// URL",
                    kind=ErrorKind.PERMANENT,
                    error_type="InvalidURL",
                )
            raw_host = url.raw_host
            port = url.port or DEFAULT_PORTS[url.scheme]
            key = (url.scheme, raw_host.decode("ascii"), port)
            cached = (url, key, host_line(url.scheme, raw_host, url.port))
            remember(self.urls, id(url), cached)
        return cached[1], cached[2]

    async def send(
        self,
        method: str,
        url: httpx.URL,
        *,
        headers: httpx.Headers,
        body: Any = None,
    ) -> Answer:
        """The response, read whole; TargetError for a refusal or a network error."""
        key, host = self.url_for(url)
        lines, typed = self.headers_for(headers)
        data = None
        if body is not None:
            # What httpx sends for json=body (a NaN is a ValueError, as there).
            data = BODY_ENCODER(body).encode()
            if not typed:
                lines += b"Content-Type: application/json\r\n"
        elif method in WITH_BODY:
            data = b""
        head = b"%s %s HTTP/1.1\r\n%s%s" % (
            method.encode("ascii"),
            url.raw_path or b"/",
            host,
            lines,
        )
        pool = self.pool
        if pool is None or pool.closed or pool.loop is not asyncio.get_running_loop():
            # In the running loop, on first use (a client used again from
            # another loop, or after it was closed, starts afresh).
            pool = self.pool = Pool(
                self.policy,
                connect_timeout=BACKSTOP_TIMEOUT["connect"],
                read_timeout=BACKSTOP_TIMEOUT["read"],
                setup_timeout=BACKSTOP_TIMEOUT["pool"],
            )
        try:
            status, raw_headers, content = await pool.request(key, head, data)
        except PolicyRefused as refusal:
            raise TargetError(
                str(refusal), kind=ErrorKind.PERMANENT, error_type="NetworkPolicy"
            ) from None
        except CallError as exc:
            raise TargetError(
                exc.message,
                kind=ErrorKind.PERMANENT
                if exc.error_type == "AnswerTooLarge"
                else ErrorKind.TRANSIENT,
                error_type=exc.error_type,
            ) from exc
        if PlainAnswer.fits(raw_headers):
            return PlainAnswer(status, raw_headers, content)
        response = httpx.Response(status, headers=raw_headers, content=content)
        if "charset" not in response.headers.get("content-type", "").lower():
            # What httpx would find, without its parse of the header (an
            # email.message per response): no charset, so UTF-8.
            response.encoding = "utf-8"
        return response

    async def aclose(self) -> None:
        if self.pool is not None:
            await self.pool.aclose()
