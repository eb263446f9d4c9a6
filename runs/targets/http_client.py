"""What the targets that call an HTTP endpoint share.

One way to send a request (through the network policy, checked on the
resolved address at connect time), one way to turn an HTTP error into a
``TargetError`` (transient, quota or permanent, with Retry-After), and one way
to quote an error body without echoing a page.
"""

from __future__ import annotations

import email.utils
import json
import time
from collections.abc import Iterable
from typing import Any

import aiohttp
import httpx
from httpx_aiohttp import AiohttpTransport

from runs.models import ErrorKind
from runs.netpolicy import current_policy, policy_session, refusal_in
from runs.targets.base import TargetError

TRANSIENT_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})
QUOTA_WORDS = (
    "insufficient_quota",
    "quota exceeded",
    "exceeded your current quota",
    "billing",
)
MAX_RETRY_AFTER_SECONDS = 60.0
# An error body is kept in the attempt log up to this many characters, and its
# JSON message quoted in the error up to ERROR_MESSAGE_LIMIT: enough to debug a
# provider's error, too little to read a page back through the endpoint.
ERROR_BODY_LIMIT = 4096
ERROR_MESSAGE_LIMIT = 300
# Per-attempt timeouts are the executor's job; this backstop only makes sure
# that no socket outlives its purpose.
BACKSTOP_TIMEOUT = {"connect": 30.0, "read": 600.0, "write": 600.0, "pool": 600.0}
REDACTED = "[secret]"


def parse_retry_after(value: str | None) -> float | None:
    """Seconds to wait from a Retry-After header (seconds or HTTP date), capped."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        seconds = when.timestamp() - time.time()
    return min(max(seconds, 0.0), MAX_RETRY_AFTER_SECONDS)


def error_summary(response: httpx.Response) -> str:
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


def classify_status(status: int, body: str) -> ErrorKind:
    if status == 429 and any(word in body.lower() for word in QUOTA_WORDS):
        return ErrorKind.QUOTA
    if status in TRANSIENT_STATUSES:
        return ErrorKind.TRANSIENT
    return ErrorKind.PERMANENT


def redact(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every secret value replaced: a server may echo its headers."""
    for value in secrets:
        if value:
            text = text.replace(value, REDACTED)
    return text


def status_error(
    response: httpx.Response, *, secrets: Iterable[str] = ()
) -> TargetError:
    """The error for a response whose status is not a success."""
    body = response.text
    secrets = tuple(secrets)
    return TargetError(
        redact(error_summary(response), secrets),
        kind=classify_status(response.status_code, body),
        http_status=response.status_code,
        raw_body=redact(body[:ERROR_BODY_LIMIT], secrets),
        retry_after=parse_retry_after(response.headers.get("retry-after")),
        error_type=f"HTTP{response.status_code}",
    )


class PolicyClient:
    """Sends requests straight to a transport over aiohttp's pool.

    httpx's own connection pool spends milliseconds per request at high
    concurrency, and its client adds auth, redirect and cookie handling that
    a call to a model or agent endpoint never needs. The executor bounds the
    calls in flight; the connector lets through only the addresses the
    network policy permits, and redirects are never followed.
    """

    def __init__(self) -> None:
        policy = current_policy()
        self.transport = AiohttpTransport(client=lambda: policy_session(policy))

    async def send(
        self,
        method: str,
        url: httpx.URL,
        *,
        headers: httpx.Headers,
        body: Any = None,
    ) -> httpx.Response:
        """The response, read whole; TargetError for a refusal or a network error."""
        try:
            request = httpx.Request(
                method,
                url,
                headers=headers,
                json=body,
                extensions={"timeout": BACKSTOP_TIMEOUT},
            )
            response = await self.transport.handle_async_request(request)
            try:
                await response.aread()
            finally:
                await response.aclose()
        except (httpx.TransportError, aiohttp.ClientError) as exc:
            refusal = refusal_in(exc)
            if refusal is not None:
                raise TargetError(
                    str(refusal), kind=ErrorKind.PERMANENT, error_type="NetworkPolicy"
                ) from None
            # The transport maps aiohttp's errors to httpx's loosely (a refused
            # connection becomes ConnectTimeout): report the original.
            cause = (
                exc.__cause__ if isinstance(exc.__cause__, aiohttp.ClientError) else exc
            )
            raise TargetError(
                f"{type(cause).__name__}: {cause}",
                kind=ErrorKind.TRANSIENT,
                error_type=type(cause).__name__,
            ) from exc
        return response

    async def aclose(self) -> None:
        await self.transport.aclose()
