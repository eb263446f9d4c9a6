"""Run options: one frozen dataclass, declared once, validated once.

Each option's type, default, bounds, label, help and group live here; the
new-run form, ``evalrun``'s flags and the API schema are derived from them
(``runs.plugins.describe``).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from pydantic import ConfigDict, Field
from pydantic.dataclasses import dataclass

from runs.plugins import BackoffBaseSeconds, BackoffCapSeconds, describe, validate

BASIC, LIMITS, ADVANCED = "basic", "limits", "advanced"


def option(
    default: Any,
    *,
    group: str,
    label: str | None = None,
    help: str | None = None,
    ge: float | None = None,
    le: float | None = None,
    flag: str | None = None,
) -> Any:
    """An option's declaration; ``flag`` names its ``evalrun`` flag when it differs.

    An option whose type carries its bounds, label and help (``Annotated``,
    shared with the plug-ins that mean the same) gives none of them here.
    """
    extra: dict[str, Any] = {"x-group": group}
    if flag:
        extra["x-flag"] = flag
    # Only what is given: an explicit None would override the type's own.
    given: dict[str, Any] = {"ge": ge, "le": le, "title": label, "description": help}
    declared = {key: value for key, value in given.items() if value is not None}
    return Field(default, json_schema_extra=extra, **declared)


@dataclass(frozen=True, config=ConfigDict(extra="forbid"))
class RunOptions:
    concurrency: int = option(
        8, ge=1, le=1024, label="Concurrency", help="Items in flight at once.",
        group=BASIC,
    )  # fmt: skip
    timeout_seconds: float = option(
        60.0, ge=0.01, le=24 * 3600, label="Timeout (seconds per attempt)",
        help="An attempt that takes longer is stopped and counts as timed out.",
        group=BASIC, flag="--timeout",
    )  # fmt: skip
    max_attempts: int = option(
        3, ge=1, le=20, label="Max attempts",
        help="Attempts per item; only transient failures are retried.", group=BASIC,
    )  # fmt: skip
    epochs: int = option(
        1, ge=1, le=100, label="Epochs", help="Times every item is run.", group=BASIC
    )
    # Optional limits; None means none.
    deadline_seconds: float | None = option(
        None, ge=0.1, le=7 * 24 * 3600, label="Run deadline (seconds)",
        help="Stop the run after this long.", group=LIMITS, flag="--deadline",
    )  # fmt: skip
    rate_limit_rpm: float | None = option(
        None, ge=0.1, le=10_000_000, label="Rate limit (requests a minute)",
        help="Requests a minute to the target, across all workers.", group=LIMITS,
    )  # fmt: skip
    retry_budget: int | None = option(
        None, ge=0, le=10_000_000, label="Retry budget",
        help="Retries for the whole run.", group=LIMITS,
    )  # fmt: skip
    # Stop starting items once the run has cost this much (runs/calls/pricing.py);
    # the items in flight finish, so it may pass by their cost.
    cost_budget: float | None = option(
        None, ge=0.0, le=1_000_000_000, label="Cost budget (USD)",
        help="Stop starting items once the run has cost this many US dollars; "
        "the items in flight finish, and the rest are skipped (resume with a "
        "higher budget).", group=LIMITS,
    )  # fmt: skip
    # Lower concurrency on a burst of 429s, raise it back as calls succeed.
    adaptive_concurrency: bool = option(
        True, label="Back off on 429s",
        help="Lower the concurrency on a burst of 429s, raise it back after.",
        group=LIMITS,
    )  # fmt: skip
    # Stop a run whose items mostly fail: after fail_fast_min_items results,
    # when the failed fraction reaches fail_fast_error_rate.
    fail_fast_error_rate: float | None = option(
        None, ge=0.0, le=1.0, label="Fail fast at error rate",
        help="0 to 1: stop once this fraction of items failed.", group=LIMITS,
        flag="--fail-fast",
    )  # fmt: skip
    fail_fast_min_items: int = option(
        20, ge=1, le=10_000_000, label="… after at least N items",
        help="Results needed before the error rate can stop the run.", group=LIMITS,
    )  # fmt: skip
    scorer_timeout_seconds: float = option(
        60.0, ge=0.01, le=3600, label="Scorer timeout (seconds)",
        help="A scorer that takes longer records an error.", group=ADVANCED,
    )  # fmt: skip
    backoff_base_seconds: BackoffBaseSeconds = option(0.5, group=ADVANCED)
    backoff_max_seconds: BackoffCapSeconds = option(30.0, group=ADVANCED)
    # How long the database may stay unavailable before the run stops.
    storage_timeout_seconds: float = option(
        30.0, ge=0.1, le=3600, label="Storage timeout (seconds)",
        help="How long the database may be unavailable before the run stops.",
        group=ADVANCED,
    )  # fmt: skip

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None, *, path: str = "") -> RunOptions:
        """Build options from user input, naming the field that is wrong.

        Empty values (None, "") mean "the default", as an empty form field does.
        """
        given = {key: value for key, value in (data or {}).items() if value != ""}
        cleaned = validate(cls, given, path=path, noun="a run option")
        return cls(**cleaned)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def option_params() -> tuple[Any, ...]:
    """The declared options, as forms and flags see them."""
    return describe(RunOptions)
