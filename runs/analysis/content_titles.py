"""One-line titles of content clusters, written by the run's judge model.

When a run has an ``llm_judge`` scorer, its endpoint (base URL, model and
key, as the scorer names them) is asked once per cluster, for at most
``TITLED`` clusters, to name what a sample of the cluster's items have in
common. It is a nicety: every request has ``TITLE_SECONDS`` in all, and a
refusal, an error or a timeout leaves the clusters named by their terms, with
a note; it never fails the clusters.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from asgiref.sync import async_to_sync

from runs.calls.chat_client import ChatClient, EndpointParams
from runs.errors import InvalidInput
from runs.models import Run
from runs.plugins.scorers import SCORERS
from runs.plugins.targets import TargetError
from runs.secrets.store import plugin_context

JUDGE_KIND = "llm_judge"
TITLED = 12
TITLE_SECONDS = 30.0
TITLE_CHARACTERS = 80
SAMPLE_CHARACTERS = 600
ENDPOINT_FIELDS = ("base_url", "model", "api_key_secret", "api_key_env")
SYSTEM = (
    "You name groups of failed test items. Answer with one short line of at "
    "most eight words that says what the items have in common, nothing else."
)


def _judge(run: Run) -> tuple[str, dict[str, Any]] | None:
    """The name and parameters of the run's first LLM judge, if any."""
    for spec in run.scorers:
        if spec.get("kind") == JUDGE_KIND:
            return spec.get("name") or JUDGE_KIND, dict(spec.get("params") or {})
    return None


def _prompt(samples: Sequence[str]) -> str:
    shown = "\n\n".join(
        f"Item {n}:\n{text[:SAMPLE_CHARACTERS]}" for n, text in enumerate(samples, 1)
    )
    return f"These failed items fall in one group.\n\n{shown}\n\nName the group."


def _title(content: Any) -> str:
    lines = str(content or "").strip().splitlines()
    line = lines[0].strip().strip("\"'*#").strip() if lines else ""
    if len(line) > TITLE_CHARACTERS:
        line = line[: TITLE_CHARACTERS - 1] + "…"
    return line


async def _titles(
    client: ChatClient, model: str, samples: list[list[str]]
) -> list[str]:
    async def one(texts: list[str]) -> str:
        reply = await client.complete(
            {
                "model": model,
                "messages": [
                    {"role": "system", "content": SYSTEM},
                    {"role": "user", "content": _prompt(texts)},
                ],
                "max_tokens": 40,
                "temperature": 0,
            }
        )
        return _title(reply.content)

    try:
        async with asyncio.timeout(TITLE_SECONDS):
            return list(await asyncio.gather(*(one(texts) for texts in samples)))
    finally:
        await client.aclose()


def cluster_titles(*, run: Run, samples: list[list[str]]) -> tuple[list[str], str]:
    """A title per cluster ("" for none) and a note when the judge failed."""
    titles = [""] * len(samples)
    judge = _judge(run)
    if judge is None or not samples:
        return titles, ""
    name, config = judge
    params = {field: config[field] for field in ENDPOINT_FIELDS if config.get(field)}
    try:
        context = plugin_context(
            run.project_id, SCORERS[JUDGE_KIND], config, path=f"scorers.{name}.params"
        )
        client = ChatClient(EndpointParams.model_validate(params), context)
        named = async_to_sync(_titles)(client, params["model"], samples[:TITLED])
    except (InvalidInput, ValueError, KeyError, TargetError, TimeoutError) as exc:
        message = getattr(exc, "message", "") or str(exc) or type(exc).__name__
        return titles, f"the judge could not name the clusters ({message})"
    titles[: len(named)] = named
    return titles, ""
