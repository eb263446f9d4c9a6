"""One test request through a target, as a run would send it, for the
"send one request" button: the answer or the error, never a secret."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import ConfigDict, Field

from runs.errors import ConfigError
from runs.plugins.targets import TargetError, TargetInput, build_target
from runs.secrets.redaction import Redactor

if TYPE_CHECKING:
    from runs.plugins import TargetContext

MAX_CHARS = 10_000


# Also the try endpoint's schema (its docstring and descriptions are the
# API's documentation).
@dataclass(frozen=True, slots=True)
class TargetTry:
    """What one test request to a target gave: an answer or an error."""

    # Every field is in every answer, whatever its default.
    __pydantic_config__ = ConfigDict(json_schema_serialization_defaults_required=True)

    ok: Annotated[bool, Field(description="the target answered")]
    output: Annotated[str, Field(description="the answer, as text")] = ""
    error: str = ""
    error_type: str = ""
    latency_ms: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    http_status: int | None = None


async def send_one(
    kind: str,
    config: dict[str, Any],
    text: str,
    seconds: float,
    context: TargetContext | None = None,
) -> TargetTry:
    """Build the target, send ``text`` under a timeout of ``seconds``, close it."""
    item = TargetInput(index=0, external_id="try", input=text)
    started = time.perf_counter()

    def elapsed() -> float:
        return round((time.perf_counter() - started) * 1000, 1)

    try:
        plugin = build_target(kind, config, context=context)
    except ConfigError as exc:
        return TargetTry(ok=False, error=str(exc), error_type="ConfigError")
    try:
        async with asyncio.timeout(seconds):
            answer = await plugin.generate(item)
    except TimeoutError:
        return TargetTry(
            ok=False,
            error=f"no answer within {seconds:g} seconds",
            error_type="Timeout",
            latency_ms=elapsed(),
        )
    except TargetError as exc:
        return TargetTry(
            ok=False,
            error=exc.message,
            error_type=exc.error_type,
            latency_ms=elapsed(),
            http_status=exc.http_status,
        )
    except Exception as exc:  # a third-party plug-in may raise anything
        return TargetTry(
            ok=False,
            error=f"{type(exc).__name__}: {exc}",
            error_type=type(exc).__name__,
            latency_ms=elapsed(),
        )
    finally:
        await plugin.aclose()
    output = answer.output
    return TargetTry(
        ok=True,
        output=output if isinstance(output, str) else json.dumps(output, default=str),
        latency_ms=elapsed(),
        prompt_tokens=answer.prompt_tokens,
        completion_tokens=answer.completion_tokens,
        http_status=answer.http_status,
    )


async def redacted(outcome: TargetTry, redactor: Redactor) -> TargetTry:
    """The outcome with every secret replaced (in every form ``Redactor``
    finds; a long answer in a worker thread), then its texts cut to MAX_CHARS:
    cut first, a secret's remainder could pass."""
    output, error = await redactor.redacted([outcome.output, outcome.error])
    return replace(outcome, output=output[:MAX_CHARS], error=error[:MAX_CHARS])
