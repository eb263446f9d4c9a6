"""An alert as the three channels read it, and a webhook's signature.

The webhook's body is JSON (``alert_payload``); its signature is
``X-Evalsite-Signature: sha256=<hex>``, the HMAC-SHA256 under the channel's
secret of ``<timestamp>.<body>``, where ``<timestamp>`` is the
``X-Evalsite-Timestamp`` header (Unix seconds): a receiver recomputes it over
the raw body and refuses a timestamp too old (a replay).
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Sequence
from typing import Any

from django.conf import settings
from django.urls import reverse

from runs.alerts.findings import Finding
from runs.models import Project, Run

SIGNATURE_HEADER = "X-Evalsite-Signature"
TIMESTAMP_HEADER = "X-Evalsite-Timestamp"
DELIVERY_HEADER = "X-Evalsite-Delivery"
EVENT_ALERT = "run.regression"
EVENT_TEST = "test"


def page_url(path: str) -> str:
    """A page's address under ``EVALSITE_BASE_URL`` (its path when unset)."""
    return settings.EVALSITE_BASE_URL + path


def _run(run: Run) -> dict[str, Any]:
    return {
        "id": run.pk,
        "name": run.name,
        "status": run.status,
        "target": run.target_name,
        "dataset": run.dataset_id,
        "url": page_url(reverse("runs:run_detail", args=[run.pk])),
    }


def _evaluation(run: Run) -> dict[str, Any] | None:
    evaluation = run.evaluation
    if evaluation is None:
        return None
    path = reverse("runs:evaluation_detail", args=[evaluation.pk])
    return {"id": evaluation.pk, "name": evaluation.name, "url": page_url(path)}


def alert_payload(
    *, run: Run, baseline: Run | None, findings: Sequence[Finding]
) -> dict[str, Any]:
    """The alert of a run: its project, evaluation, run, baseline and findings."""
    project = run.project
    return {
        "event": EVENT_ALERT,
        "project": {"id": project.pk, "name": project.name},
        "evaluation": _evaluation(run),
        "run": _run(run),
        "baseline": _run(baseline) if baseline is not None else None,
        "findings": [finding.as_dict() for finding in findings],
    }


def test_payload(*, project: Project, channel_name: str) -> dict[str, Any]:
    return {
        "event": EVENT_TEST,
        "project": {"id": project.pk, "name": project.name},
        "channel": channel_name,
        "message": "A test from evalsite: this channel receives the project's "
        "regression alerts.",
    }


def headline(payload: dict[str, Any]) -> str:
    project = payload["project"]["name"]
    if payload.get("event") == EVENT_TEST:
        return f"[evalsite] {project}: test of channel {payload.get('channel', '')}"
    run = payload["run"]
    label = run["name"] or f"run {run['id']}"
    count = len(payload["findings"])
    return f"[evalsite] {project}: {label} has {count} finding{'s' * (count != 1)}"


def lines(payload: dict[str, Any]) -> list[str]:
    """The alert as lines of text: for Slack's fallback and the email."""
    if payload.get("event") == EVENT_TEST:
        return [payload["message"]]
    run, baseline = payload["run"], payload.get("baseline")
    out = []
    if evaluation := payload.get("evaluation"):
        out.append(f"Evaluation: {evaluation['name']} {evaluation['url']}")
    out.append(f"Run: {run['name'] or run['id']} ({run['status']}) {run['url']}")
    if baseline:
        out.append(f"Baseline: {baseline['name'] or baseline['id']} {baseline['url']}")
    out.extend(f"- {finding['message']}" for finding in payload["findings"])
    return out


def slack_payload(payload: dict[str, Any]) -> dict[str, Any]:
    """What a Slack-compatible incoming webhook reads: text and blocks."""
    title, body = headline(payload), lines(payload)
    return {
        "text": "\n".join([title, *body]),
        "blocks": [
            {"type": "header", "text": {"type": "plain_text", "text": title[:150]}},
            {
                "type": "section",
                "text": {"type": "mrkdwn", "text": "\n".join(body)[:3000]},
            },
        ],
    }


def email_message(payload: dict[str, Any]) -> tuple[str, str]:
    """(subject, body) of the alert's email."""
    return headline(payload), "\n".join(lines(payload)) + "\n"


def body_bytes(payload: dict[str, Any]) -> bytes:
    return json.dumps(payload, separators=(",", ":"), sort_keys=True).encode()


def signature(secret: str, timestamp: int, body: bytes) -> str:
    """``sha256=<hex>``: the HMAC-SHA256 of ``<timestamp>.<body>``."""
    message = str(timestamp).encode() + b"." + body
    digest = hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()
    return f"sha256={digest}"
