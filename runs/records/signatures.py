"""Signatures of failures: what varies between two reports of one failure is masked.

Real endpoints put request ids, token counts, URLs, timestamps and the
offending values in their messages; the same failure must give the same
signature however they vary, and different failures must stay apart. This is
the one place that decides it, for errors of results and for the reasons of
failing scores. The masked text (the *pattern*) is kept for display; the
signature is a short hash of the kind, the type and the pattern.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from django.db.models import Q

# Only the start of a message is read: what distinguishes failures is there,
# and a long body must not cost a long regular-expression scan.
READ_LIMIT = 4_000
PATTERN_MAX_LENGTH = 300
SIGNATURE_LENGTH = 16
RECOMPUTE_BATCH = 1_000

# A failing score: its scorer said no, or the scorer itself failed.
FAILING_SCORE = Q(passed=False) | ~Q(error="")
SCORE_FAILED = "failed"
SCORE_ERRORED = "error"

_MONTH = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*"
_DAY = r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)[a-z]*"
_CLOCK = r"\d{1,2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?"
_ZONE = r"(?:\s?(?:Z|UTC|GMT|[+-]\d{2}:?\d{2}))?"

_DIGITS = "0123456789"

# Order matters: what contains digits or quotes of its own (a URL, a
# timestamp) is masked whole before the numbers and quotes inside it are.
# Each mask is tried only on a text holding one of the characters it needs.
MASKS: tuple[tuple[re.Pattern[str], str, str], ...] = tuple(
    (re.compile(pattern, flags), replacement, needs)
    for pattern, flags, replacement, needs in (
        # URLs, with any scheme
        (r"\b[a-z][a-z0-9+.-]*://[^\s'\"<>()\[\]{}]+", re.I, "<url>", ":"),
        # e-mail addresses
        (r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b", 0, "<email>", "@"),
        # ISO 8601: 2026-11-22T16:57:13.123Z, 2026-11-22 16:57, 2026-11-22
        (
            rf"\b\d{{4}}-\d{{2}}-\d{{2}}(?:[T ]{_CLOCK}{_ZONE})?(?![\w-])",
            0,
            "<time>",
            "-",
        ),
        # common log format: 22/Nov/2026:16:57:13 +0000
        (
            rf"\b\d{{1,2}}/{_MONTH}/\d{{4}}:\d{{2}}:\d{{2}}:\d{{2}}{_ZONE}",
            0,
            "<time>",
            "/",
        ),
        # RFC 1123 / ctime / syslog: Sun, 22 Nov 2026 16:57:13 GMT,
        # Sun Nov 22 16:57:13 2026, Nov 22 16:57:13
        (
            rf"\b(?:{_DAY},?\s+)?\d{{1,2}}\s+{_MONTH}\s+\d{{4}}\s+{_CLOCK}{_ZONE}",
            0,
            "<time>",
            ":",
        ),
        (
            rf"\b(?:{_DAY}\s+)?{_MONTH}\s+\d{{1,2}}\s+{_CLOCK}(?:\s+\d{{4}})?{_ZONE}",
            0,
            "<time>",
            ":",
        ),
        # a time of day alone: 16:57:13, 16:57:13.5
        (r"\b\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?\b", 0, "<time>", ":"),
        # UUIDs
        (
            r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b",
            re.I,
            "<uuid>",
            "-",
        ),
        # quoted text; an apostrophe inside a word ("model's") is no quote, and
        # a JSON key (followed by a colon) is kept: it names, it does not vary
        (r"(?<!\w)\"[^\"\n]{0,500}\"(?!\s*:)", 0, "<str>", '"'),
        (r"(?<!\w)'[^'\n]{0,500}'(?!\w)", 0, "<str>", "'"),
        (r"`[^`\n]{0,500}`", 0, "<str>", "`"),
        # typographic quotes
        (
            "[\u201c\u2018][^\u201d\u2019\n]{0,500}[\u201d\u2019]",
            0,
            "<str>",
            "\u201c\u2018",
        ),
        # file paths: /a/b, ./a/b, ~/a, C:\a\b
        (r"(?<![\w<>/])(?:~|\.{1,2})?(?:/[\w.@%+~-]+){2,}/?", 0, "<path>", "/"),
        (r"(?<![\w<>])(?:~|\.{1,2})/[\w.@%+~-]+", 0, "<path>", "/"),
        (r"\b[A-Za-z]:\\[^\s'\"<>|]+", 0, "<path>", "\\"),
        # ids with a prefix: req_8f3a9c2d, chatcmpl-AbC123xYz, call_x1y2z3:
        # the prefix says what it is and is kept
        (
            r"\b([A-Za-z][A-Za-z0-9]*[_-])(?=[A-Za-z0-9]*\d)[A-Za-z0-9]{6,}\b",
            0,
            r"\1<id>",
            "_-",
        ),
        # hexadecimal numbers and long hex strings (hashes, trace ids)
        (r"\b0x[0-9a-f]+\b", re.I, "<hex>", "xX"),
        (
            r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{8,}\b",
            re.I,
            "<hex>",
            _DIGITS,
        ),
        # other long tokens mixing letters and digits (opaque ids, keys)
        (
            r"\b(?=[A-Za-z0-9]*[A-Za-z])(?=[A-Za-z0-9]*\d)[A-Za-z0-9]{12,}\b",
            0,
            "<id>",
            _DIGITS,
        ),
        # numbers, with their sign, separators, decimals and exponent; a
        # number after a hyphen too, even inside a name: gpt-4o reads gpt-<n>o
        (r"(?<![\w.])[-+]?\d+(?:[,.]\d+)*(?:e[-+]?\d+)?", re.I, "<n>", _DIGITS),
        # digits at the end of a word (item42, v2), not followed by a letter
        # (gpt4o is kept)
        (r"\d+(?![A-Za-z])", 0, "<n>", _DIGITS),
    )
)
_SPACES = re.compile(r"\s+")


# Each mask's characters as a set: a text's characters are found once, not
# once per mask (a generator over every character a mask needs cost more
# than the masking, about a tenth of storing a failing score).
_NEEDS = tuple(frozenset(needs) for _, _, needs in MASKS)


@functools.lru_cache(maxsize=2048)
def mask(message: str) -> str:
    """The message with whatever varies between reports masked, whitespace folded.

    Cached: the same message (an endpoint's error, a scorer's reason) comes
    back for many items of a run.
    """
    text = message[:READ_LIMIT]
    present = set(text)
    for (pattern, replacement, _), needs in zip(MASKS, _NEEDS, strict=True):
        if not needs.isdisjoint(present):
            text, count = pattern.subn(replacement, text)
            if count:
                present = set(text)
    text = _SPACES.sub(" ", text).strip()
    if len(text) > PATTERN_MAX_LENGTH:
        text = text[: PATTERN_MAX_LENGTH - 1] + "…"
    return text


def _digest(*parts: str) -> str:
    joined = "\x1f".join(parts).encode()
    return hashlib.sha1(joined, usedforsecurity=False).hexdigest()[:SIGNATURE_LENGTH]


@dataclass(frozen=True, slots=True)
class Signature:
    pattern: str
    signature: str


def error_signature(*, kind: str, error_type: str, message: str) -> Signature:
    """The signature of a result's error: its kind, its type and its masked message."""
    pattern = mask(message)
    return Signature(pattern, _digest("error", kind, error_type, pattern))


def score_pattern(*, reason: str, error: str) -> str:
    """The pattern of a failing score: its scorer's error masked, else the
    first line of its reason masked.

    A scorer states on a reason's first line what failed, and below it what
    shows it (code_exec: "AssertionError in the tests", then the traceback);
    it quotes, with backticks, the values that vary (math: the answer and the
    expected one), so that failures of one kind share a pattern.
    """
    if error:
        return mask(error)
    return mask(reason[:READ_LIMIT].lstrip().partition("\n")[0])


def score_signature(
    *, passed: bool | None, reason: str, error: str
) -> Signature | None:
    """The signature of a failing score's reason (or of its scorer's error).

    None for a score that did not fail: only failures are grouped.
    """
    if not error and passed is not False:
        return None
    pattern = score_pattern(reason=reason, error=error)
    kind = SCORE_ERRORED if error else SCORE_FAILED
    return Signature(pattern, _digest("score", kind, pattern))


def result_has_error(*, status: str, error_kind: str, error_type: str) -> bool:
    return status != "succeeded" and bool(error_kind or error_type)


# -- stored rows -------------------------------------------------------------


def _batches(queryset: Any, fields: tuple[str, ...]) -> Iterator[list[tuple[Any, ...]]]:
    """Rows in primary-key order, a batch at a time (no long-lived cursor)."""
    last = 0
    while True:
        rows = list(
            queryset.filter(pk__gt=last)
            .order_by("pk")
            .values_list("pk", *fields)[:RECOMPUTE_BATCH]
        )
        if not rows:
            return
        yield rows
        last = rows[-1][0]


def signatures_recompute(*, result_model: Any, score_model: Any) -> tuple[int, int]:
    """Recompute the stored signatures of every errored result and failing score.

    Takes the model classes, so that a migration can pass its historical ones.
    Returns how many results and scores were updated.
    """
    results = scores = 0
    errored = result_model.objects.exclude(status="succeeded")
    fields = ("status", "error_kind", "error_type", "error_message")
    for rows in _batches(errored, fields):
        updates = []
        for pk, status, kind, error_type, message in rows:
            if not result_has_error(
                status=status, error_kind=kind, error_type=error_type
            ):
                continue
            sig = error_signature(kind=kind, error_type=error_type, message=message)
            updates.append(
                result_model(
                    pk=pk, error_signature=sig.signature, error_pattern=sig.pattern
                )
            )
        result_model.objects.bulk_update(updates, ["error_signature", "error_pattern"])
        results += len(updates)
    failing = score_model.objects.filter(FAILING_SCORE)
    for rows in _batches(failing, ("passed", "reason", "error")):
        updates = []
        for pk, passed, reason, error in rows:
            found = score_signature(passed=passed, reason=reason, error=error)
            if found is not None:
                updates.append(score_model(pk=pk, reason_signature=found.signature))
        score_model.objects.bulk_update(updates, ["reason_signature"])
        scores += len(updates)
    return results, scores
