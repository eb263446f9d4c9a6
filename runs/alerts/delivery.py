"""Sending one delivery: attempt after attempt, each recorded, never raising.

A webhook and Slack are POSTed through the network policy (checked on the
resolved address at connect time, as targets' requests are); an email goes
through Django's email backend. A network error, a timeout, a 5xx or a 429
(its Retry-After honoured) is tried again, up to ``EVALSITE_ALERT_ATTEMPTS``
attempts, with exponential back-off and full jitter from
``EVALSITE_ALERT_RETRY_SECONDS``; any other answer, or a refusal by the
policy, would fail the same way and ends the delivery. Every attempt is
appended to the delivery's log as it ends, so the page shows a delivery that
is still being retried.

A delivery waiting out a back-off is a row with its due time (``due_at``),
not a sleep in some process: whatever process sends deliveries takes up the
due ones, after a restart too. An attempt is taken by one conditional update
of the row, as a run's executor claims its run: however many processes look
at once, one makes it.
"""

from __future__ import annotations

import smtplib
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import aiohttp
from channels.db import database_sync_to_async
from django.conf import settings
from django.core.mail import send_mail
from django.db.models import Min, Q
from django.utils import timezone

from runs.alerts import payloads
from runs.calls.netpolicy import refusal_in
from runs.calls.retry import Backoff, parse_retry_after
from runs.calls.sessions import policy_session
from runs.models import AlertChannel, AlertDelivery
from runs.secrets.destinations import Destination
from runs.secrets.store import SecretUnavailable, decrypt

Status = AlertDelivery.Status
USER_AGENT = "evalsite-alerts/1"
# What is kept of an answer's body in the attempt log.
BODY_LIMIT = 300
RETRY_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})
UNENDED = (Status.PENDING, Status.SENDING, Status.RETRYING)
# What ``attempt_next`` answers when the attempt was not its to make: not due
# yet, or another process makes it now.
HELD = "held"
# How long past its timeout an attempt's maker is given before it is taken
# for gone (its process died mid-send), and another may make the attempt.
HOLD_MARGIN_SECONDS = 30
# Due deliveries taken up at a time.
DUE_BATCH = 100


@dataclass(frozen=True, slots=True)
class Job:
    """A delivery with what sending it needs (decrypted, never stored)."""

    delivery_id: int
    kind: str
    payload: dict[str, Any]
    url: str = ""
    secret: str = ""
    emails: list[str] = field(default_factory=list)
    done: int = 0  # attempts already made (a job taken up again)


@dataclass(frozen=True, slots=True)
class Outcome:
    ok: bool
    status_code: int | None = None
    error: str = ""
    retry: bool = False
    retry_after: float | None = None


def _load(delivery_id: int) -> Job | str:
    """The job of a delivery still to send, or why there is none."""
    delivery = (
        AlertDelivery.objects.select_related("channel").filter(pk=delivery_id).first()
    )
    if delivery is None:
        return "gone"
    if delivery.is_final:
        return "done"
    channel = delivery.channel
    try:
        url = (
            decrypt(channel.url_ciphertext, name="url")
            if channel.url_ciphertext
            else ""
        )
        secret = (
            decrypt(channel.secret_ciphertext, name="signing secret")
            if channel.secret_ciphertext
            else ""
        )
    except SecretUnavailable as exc:
        number = len(delivery.attempts) + 1
        _record(delivery_id, number, Outcome(ok=False, error=str(exc)), 0.0, final=True)
        return Status.FAILED
    return Job(
        delivery_id=delivery.pk,
        kind=channel.kind,
        payload=delivery.payload,
        url=url,
        secret=secret,
        emails=list(channel.emails),
        done=len(delivery.attempts),
    )


def _due(now: datetime) -> Q:
    return Q(status__in=UNENDED) & (Q(due_at__isnull=True) | Q(due_at__lte=now))


def _claim(delivery_id: int) -> bool:
    """Take the delivery's next attempt, if it is due and nobody makes it."""
    now = timezone.now()
    hold = settings.EVALSITE_ALERT_TIMEOUT_SECONDS + HOLD_MARGIN_SECONDS
    return bool(
        AlertDelivery.objects.filter(_due(now), pk=delivery_id).update(
            status=Status.SENDING, due_at=now + timedelta(seconds=hold)
        )
    )


def _unclaimed(delivery_id: int) -> tuple[str, float | None]:
    """Why an attempt was not taken: the delivery is gone or has ended (and
    nothing more is due), or it is held until its due time."""
    row = AlertDelivery.objects.filter(pk=delivery_id).values_list("status", "due_at")
    found = row.first()
    if found is None:
        return "gone", None
    status, due_at = found
    if status not in UNENDED:
        return "done", None
    now = timezone.now()
    return HELD, max((due_at - now).total_seconds(), 0.0) if due_at else 0.0


def deliveries_due(*, exclude: set[int]) -> tuple[list[int], float | None]:
    """The deliveries due now (but ``exclude``), oldest due first, and the
    seconds until the next one is due (None: none is waiting)."""
    now = timezone.now()
    due = list(
        AlertDelivery.objects.filter(_due(now))
        .exclude(pk__in=exclude)
        .order_by("due_at", "pk")
        .values_list("pk", flat=True)[:DUE_BATCH]
    )
    later = AlertDelivery.objects.filter(status__in=UNENDED, due_at__gt=now).aggregate(
        first=Min("due_at")
    )["first"]
    return due, None if later is None else (later - now).total_seconds()


def _record(
    delivery_id: int,
    number: int,
    outcome: Outcome,
    seconds: float,
    *,
    final: bool,
    wait: float | None = None,
) -> None:
    delivery = AlertDelivery.objects.get(pk=delivery_id)
    delivery.attempts = [
        *delivery.attempts,
        {
            "number": number,
            "at": timezone.now().isoformat(),
            "outcome": "ok" if outcome.ok else "error",
            "status_code": outcome.status_code,
            "error": outcome.error,
            "seconds": round(seconds, 3),
        },
    ]
    if outcome.ok:
        delivery.status = Status.DELIVERED
    else:
        delivery.status = Status.FAILED if final else Status.RETRYING
    if final or outcome.ok:
        delivery.finished_at = timezone.now()
        delivery.due_at = None
    else:
        delivery.due_at = timezone.now() + timedelta(seconds=wait or 0.0)
    delivery.save(update_fields=["attempts", "status", "finished_at", "due_at"])


load = database_sync_to_async(_load)
record = database_sync_to_async(_record)
claim = database_sync_to_async(_claim)
unclaimed = database_sync_to_async(_unclaimed)


async def _post(job: Job, body: bytes, headers: dict[str, str]) -> Outcome:
    timeout = aiohttp.ClientTimeout(total=settings.EVALSITE_ALERT_TIMEOUT_SECONDS)
    try:
        async with (
            policy_session() as session,
            session.post(
                job.url,
                data=body,
                headers=headers,
                timeout=timeout,
                allow_redirects=False,
            ) as answer,
        ):
            text = (await answer.content.read(BODY_LIMIT)).decode(errors="replace")
            if 200 <= answer.status < 300:
                return Outcome(ok=True, status_code=answer.status)
            return Outcome(
                ok=False,
                status_code=answer.status,
                error=f"HTTP {answer.status}: {text.strip()[:BODY_LIMIT]}".strip(),
                retry=answer.status in RETRY_STATUSES,
                retry_after=parse_retry_after(answer.headers.get("Retry-After")),
            )
    except TimeoutError:
        return Outcome(ok=False, error="timed out", retry=True)
    except aiohttp.ClientError as exc:
        refusal = refusal_in(exc)
        if refusal is not None:
            return Outcome(ok=False, error=str(refusal))
        message = f"{type(exc).__name__}: {exc}"
        return Outcome(ok=False, error=scrubbed(message, job.url), retry=True)


def scrubbed(text: str, url: str) -> str:
    """``text`` without the URL's path and query: a Slack URL's is its token."""
    return text.replace(url, str(Destination.of(url) or "the URL"))


def _send_email(job: Job) -> Outcome:
    subject, text = payloads.email_message(job.payload)
    try:
        send_mail(subject, text, None, job.emails)
    except (smtplib.SMTPException, OSError) as exc:
        return Outcome(ok=False, error=f"{type(exc).__name__}: {exc}", retry=True)
    return Outcome(ok=True)


send_email = database_sync_to_async(_send_email)


async def attempt(job: Job) -> Outcome:
    """One attempt to send the job."""
    headers = {"Content-Type": "application/json", "User-Agent": USER_AGENT}
    if job.kind == AlertChannel.Kind.EMAIL:
        return await send_email(job)
    if job.kind == AlertChannel.Kind.SLACK:
        return await _post(
            job, payloads.body_bytes(payloads.slack_payload(job.payload)), headers
        )
    body = payloads.body_bytes(job.payload)
    timestamp = int(time.time())
    headers |= {
        payloads.TIMESTAMP_HEADER: str(timestamp),
        payloads.SIGNATURE_HEADER: payloads.signature(job.secret, timestamp, body),
        payloads.DELIVERY_HEADER: str(job.delivery_id),
    }
    return await _post(job, body, headers)


async def attempt_next(delivery_id: int) -> tuple[str, float | None]:
    """The delivery's next attempt, recorded: its status, and how long until
    it is due again (None: it has ended, or is gone).

    An attempt that is not due yet, or that another process makes now, is
    not made: ``HELD``, with the seconds until it is due.
    """
    if not await claim(delivery_id):
        return await unclaimed(delivery_id)
    job = await load(delivery_id)
    if isinstance(job, str):
        return job, None
    most = settings.EVALSITE_ALERT_ATTEMPTS
    number = job.done + 1
    started = time.monotonic()
    outcome = await attempt(job)
    final = outcome.ok or not outcome.retry or number >= most
    wait = None
    if not final:
        base = float(settings.EVALSITE_ALERT_RETRY_SECONDS)
        wait = Backoff(base=base, maximum=base * 16).delay(number, outcome.retry_after)
    await record(
        delivery_id, number, outcome, time.monotonic() - started, final=final, wait=wait
    )
    if final:
        return (Status.DELIVERED if outcome.ok else Status.FAILED), None
    return Status.RETRYING, wait
