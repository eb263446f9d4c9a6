"""User-supplied regular expressions, compiled with RE2: matching is linear in the text.

Python's ``re`` backtracks: ``(a+)+$`` against 27 characters takes seconds and,
as a C call holding the GIL, stops every thread of the process meanwhile. RE2
guarantees time linear in the text and releases the GIL while it matches, so a
pattern from a user can run in the scorer worker pool without freezing anything.
The price is RE2's syntax: no backreferences, lookarounds, atomic groups or
possessive quantifiers. Those are refused when the scorer is configured, with a
message naming the construct, rather than failing on every item of a run.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from typing import Any

import re2

MAX_PATTERN_LENGTH = 10_000
# The placeholder a pattern may use for the item's expected answer; see
# ``with_expected``. Braces not followed by a count are literal in RE2, so the
# placeholder never collides with a repetition.
EXPECTED = "{expected}"

# RE2 reports an unsupported construct by the characters it stopped at; say what
# the construct is called so the user knows what to rewrite.
_UNSUPPORTED = {
    "(?=": "lookahead (?=...)",
    "(?!": "negative lookahead (?!...)",
    "(?<=": "lookbehind (?<=...)",
    "(?<!": "negative lookbehind (?<!...)",
    "(?>": "atomic group (?>...)",
    "(?(": "conditional group (?(...)...)",
    "(?#": "comment group (?#...)",
    "(?P=": "named backreference (?P=name)",
    "(?P>": "recursion (?P>name)",
}
_POSSESSIVE = ("*+", "++", "?+", "}+")


def _options(ignore_case: bool) -> re2.Options:
    options = re2.Options()
    options.case_sensitive = not ignore_case
    options.log_errors = False  # the error goes to the user, not to stderr
    return options


def _explain(pattern: str, error: re2.error) -> str:
    detail = error.args[0] if error.args else ""
    if isinstance(detail, bytes):
        detail = detail.decode("utf-8", "replace")
    detail = str(detail)
    for prefix, name in sorted(_UNSUPPORTED.items(), key=lambda kv: -len(kv[0])):
        if prefix in pattern and (prefix[:3] in detail or prefix in detail):
            return f"uses a {name}, which the linear-time engine (RE2) cannot run"
    if re.search(r"invalid escape sequence: \\[1-9]", detail):
        return (
            "uses a backreference (\\1 ... \\9), which the linear-time engine "
            "(RE2) cannot run"
        )
    if "invalid escape sequence: \\Z" in detail:
        return "uses \\Z: write \\z for the end of the text"
    if "bad repetition operator" in detail and any(q in pattern for q in _POSSESSIVE):
        return (
            "uses a possessive quantifier (*+, ++, ?+), which the linear-time "
            "engine (RE2) cannot run"
        )
    return f"is not a valid regular expression (RE2 syntax): {detail}"


def compile_user_pattern(pattern: Any, *, ignore_case: bool = False) -> Any:
    """Compile a user's pattern with RE2, or raise ``ValueError`` saying why.

    Called by the regex scorer's parameter declaration, which reports the error
    on the ``pattern`` field.

    ``{expected}`` in the pattern is checked as if it were a literal answer.
    """
    if pattern is None or pattern == "":
        raise ValueError(
            "is required: the regular expression the output must match "
            "(write {expected} in it to stand for the item's expected answer)"
        )
    if not isinstance(pattern, str):
        raise ValueError("must be a string")
    if len(pattern) > MAX_PATTERN_LENGTH:
        raise ValueError(f"is longer than {MAX_PATTERN_LENGTH:,} characters")
    try:
        return re2.compile(pattern.replace(EXPECTED, "expected"), _options(ignore_case))
    except re2.error as exc:
        raise ValueError(_explain(pattern, exc)) from None


def schema_pattern_problem(schema: Any) -> str:
    """Why a JSON Schema's regular expressions (``pattern`` and
    ``patternProperties``) cannot run with RE2, naming where, or ""."""
    # Loaded with the first schema: a run without one never needs it.
    from runs.pools.json_validation import patterns

    for where, pattern in patterns(schema):
        try:
            compile_user_pattern(pattern)
        except ValueError as exc:
            return f"the regular expression at {where} {exc}"
    return ""


def literal_whole(answer: str) -> str:
    """A pattern matching ``answer`` literally and not as part of a longer word.

    ``\\b`` is put only beside a word character, so ``42`` does not match inside
    ``421`` and ``-3.5`` still matches in ``x = -3.5``.
    """
    escaped = re2.escape(answer)
    before = r"\b" if answer[:1].isalnum() or answer[:1] == "_" else ""
    after = r"\b" if answer[-1:].isalnum() or answer[-1:] == "_" else ""
    return f"{before}{escaped}{after}"


def with_expected(pattern: str, answers: Iterable[str], *, ignore_case: bool) -> Any:
    """Compile ``pattern`` with ``{expected}`` standing for any of ``answers``.

    Each answer is inserted escaped (matched literally) and whole (see
    ``literal_whole``); raises ``ValueError`` if the result cannot compile.
    """
    answers = [answer for answer in answers if answer]
    if not answers:
        raise ValueError("the expected answer is empty: {expected} cannot stand for it")
    choices = "|".join(literal_whole(answer) for answer in answers)
    try:
        return re2.compile(
            pattern.replace(EXPECTED, f"(?:{choices})"), _options(ignore_case)
        )
    except re2.error as exc:  # an answer too large for RE2's memory budget
        raise ValueError(
            f"with the expected answer inserted, the pattern {_explain(pattern, exc)}"
        ) from None


# Letters, digits, marks and the underscore make words (as in _is_word); a
# literal inside a longer word (42 in 421, cat in concat) is not found whole.
_NOT_WORD = r"[^\pL\pN\pM_]"


def _is_word(char: str) -> bool:
    return char == "_" or unicodedata.category(char)[0] in "LNM"


def contains_whole(text: str, needle: str) -> bool:
    """``needle`` occurs in ``text`` literally and not inside a longer word.

    One RE2 search: linear, and the GIL is released meanwhile. A needle too
    large for RE2's memory budget is looked for occurrence by occurrence.
    """
    if not needle:
        raise ValueError("an empty text cannot be looked for")
    before = f"(?:^|{_NOT_WORD})" if _is_word(needle[0]) else ""
    after = f"(?:{_NOT_WORD}|$)" if _is_word(needle[-1]) else ""
    try:
        pattern = re2.compile(f"{before}{re2.escape(needle)}{after}", _options(False))
    except re2.error:
        return _scan_whole(text, needle)
    return pattern.search(text) is not None


def _scan_whole(text: str, needle: str) -> bool:
    start = text.find(needle)
    while start != -1:
        end = start + len(needle)
        joined_before = start > 0 and _is_word(needle[0]) and _is_word(text[start - 1])
        joined_after = end < len(text) and _is_word(needle[-1]) and _is_word(text[end])
        if not (joined_before or joined_after):
            return True
        start = text.find(needle, start + 1)
    return False
