from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Any, ClassVar

import re2
from pydantic import Field, field_validator

from runs.plugins import Params
from runs.plugins.scorers import ScoreOutcome, ScorerPlugin, as_text, register
from runs.plugins.targets import TargetInput
from runs.scorers.text import collapse_whitespace, slices

# Fixed patterns, run with RE2: linear in the output, the GIL released.
_OPEN = r"(?:\*\*|__|\$|\\boxed\{|\\text(?:bf)?\{|\(|\[|\"|')*"
# "The answer is (B)", "Answer: b", "final answer: **C**", "the correct option is D".
_STATED = re2.compile(
    r"(?i)\b(?:answer|choice|option)\s*(?:is|:|=|would\s+be|should\s+be|will\s+be)?"
    r"\s*:?\s*(" + _OPEN + r")\s*([a-z])\b"
    r"|\\boxed\{\s*(?:\\text(?:bf)?\{)?\s*([a-z])\b"
)
# A reply that starts with a label: "B", "(B)", "**B**", "B) Paris", "b. Paris".
_LEADING = re2.compile(
    r"^\s*(?:\*\*|__|#+[ \t]*|>[ \t]*)?[ \t]*(\(|\[)?[ \t]*([A-Za-z])[ \t]*"
    r"(\)|\]|\.|:|\*\*|__|\n|$|[ \t]+-)"
)
# A marked letter anywhere: "(B)", "[B]", "**B**", "B)".
_MARKED = re2.compile(r"\(([A-Za-z])\)|\[([A-Za-z])\]|\*\*([A-Za-z])\*\*|\b([A-Z])\)")
# A capital letter standing alone as a word.
_BARE = re2.compile(r"\b([A-Z])\b")
# After a stated letter: "A or B", "A/B", "A and B" name two.
_ALTERNATIVE = re.compile(
    r"\s*(?:\)|\]|\*\*)?\s*(?:or|and|/|,|&)\s*[(\[*]*\s*([A-Za-z])\b"
)
# A lower-case stated letter followed by a word is the article: "answer is a bit".
_WORD_AFTER = re.compile(r"[ \t]+[A-Za-z]")
# A capital A before a lower-case word is the article ("A good question"),
# unless the word joins or judges letters ("A or B", "A is right").
_ARTICLE_A = re.compile(r"A (?!(?:or|and|nor|vs|versus|is|was|seems)\b)[a-z]")
_CLOSING = re.compile(r"[)\]*}]{0,4}")
# Beyond this many candidate letters a reply says nothing decidable.
MAX_CANDIDATES = 10_000
TOO_MANY = f"more than {MAX_CANDIDATES:,} letters"


class ChoiceParams(Params):
    letters: str = Field(
        "ABCD",
        min_length=2,
        max_length=26,
        description=(
            "The letters of the choices, in order (ABCD; ABCDE for five). A "
            "letter outside them in the output is not an answer."
        ),
    )
    options_field: str = Field(
        "choices",
        max_length=200,
        description=(
            "Dotted path into the item's metadata to the options' texts: a "
            "list (first is A) or an object from letter to text. With it, the "
            "expected answer may be an option's text and a reply that is "
            "exactly an option's text counts as its letter. Empty: none."
        ),
    )

    @field_validator("letters")
    @classmethod
    def _distinct_letters(cls, letters: str) -> str:
        letters = letters.strip().upper()
        if not re.fullmatch(r"[A-Z]+", letters):
            raise ValueError("must be letters A to Z, without spaces or commas")
        if len(set(letters)) != len(letters):
            raise ValueError("must not repeat a letter")
        return letters


@dataclass(frozen=True)
class Reading:
    """What the reply answered: a letter, or why none can be taken from it."""

    letter: str | None
    how: str


@register
class Choice(ScorerPlugin[ChoiceParams]):
    """Passes when the letter a multiple-choice reply picks is the expected one.

    The letter is read from the reply by the first rule that finds one:

    1. a statement: "The answer is (B).", "Answer: b", "final answer: **C**",
       "the correct option is D", ``\\boxed{B}``; when the reply states
       several, the last one counts (a reasoning reply corrects itself), but a
       statement naming two letters ("the answer is A or B") is ambiguous;
    2. a label the reply starts with: "B", "(B)", "**B**", "B) Paris", "b. Paris",
       unless the rest of its line names another letter;
    3. letters marked anywhere: "(B)", "[B]", "**B**", "B)";
    4. capital letters standing alone ("I pick B"; a capital A before a
       lower-case word is the article).

    Under rules 3 and 4, a reply that names two different letters is ambiguous
    and fails: it never passes by luck. Only ``letters`` (default ABCD) count;
    case and full-width forms are ignored. The expected answer is a letter
    ("B", "(b)"), a 0-based index as a JSON number (MMLU's layout: 1 is B), or,
    when the item's metadata has the options (``options_field``, default
    ``choices``), an option's text. With options, a reply that is exactly one
    option's text also counts as that option's letter.
    """

    kind: ClassVar[str] = "choice"
    label: ClassVar[str] = "Multiple-choice letter"
    example: ClassVar[dict[str, Any]] = {"letters": "ABCDE", "options_field": "choices"}

    def score(self, *, output: Any, item: TargetInput) -> ScoreOutcome:
        options = self._options(item)
        letters = self.params.letters
        if options:
            letters = letters[: len(options)]
        expected = self._expected(item, letters, options)
        text = _normalise(as_text(output))
        reading = read_letter(text, letters)
        if reading.letter is None and options and reading.how.startswith("no "):
            reading = _by_option_text(text, options) or reading
        if reading.letter is None:
            return ScoreOutcome(0.0, False, f"{reading.how}; expected {expected}")
        shown = _shown(expected, options)
        if reading.letter == expected:
            return ScoreOutcome(1.0, True, f"answered {shown} ({reading.how})")
        return ScoreOutcome(
            0.0,
            False,
            f"answered {_shown(reading.letter, options)} ({reading.how}); "
            f"expected {shown}",
        )

    def _options(self, item: TargetInput) -> dict[str, str]:
        path = self.params.options_field.strip()
        value: Any = item.metadata if path else None
        for part in path.split(".") if path else []:
            value = value.get(part) if isinstance(value, dict) else None
        if isinstance(value, list) and value:
            if len(value) > len(self.params.letters):
                raise ValueError(
                    f"the item has {len(value)} options in metadata.{path} but "
                    f"only the letters {self.params.letters} (letters)"
                )
            return {
                letter: as_text(text)
                for letter, text in zip(self.params.letters, value, strict=False)
            }
        if isinstance(value, dict) and value:
            return {str(key).strip().upper(): as_text(v) for key, v in value.items()}
        return {}

    def _expected(
        self, item: TargetInput, letters: str, options: dict[str, str]
    ) -> str:
        value = item.expected
        if value is None:
            raise ValueError("the item has no expected answer")
        if isinstance(value, int) and not isinstance(value, bool):
            if not 0 <= value < len(letters):
                raise ValueError(
                    f"the expected index {value} is outside the choices {letters}"
                )
            return letters[value]
        text = _normalise(as_text(value)).strip()
        label = re.fullmatch(r"[(\[]?\s*([A-Za-z])\s*[)\].:]?", text)
        if label and label.group(1).upper() in letters:
            return label.group(1).upper()
        if options:
            reading = _by_option_text(text, options)
            if reading is not None and reading.letter is not None:
                return reading.letter
        known = " or one of the item's options" if options else ""
        raise ValueError(
            f"the expected answer {text[:100]!r} is not a letter of {letters}{known}"
        )


def read_letter(text: str, letters: str) -> Reading:
    """The letter a reply picks, by the rules of the ``choice`` scorer."""
    stated = _last_statement(text, letters)
    if stated is not None:
        return stated
    leading = _LEADING.search(text)
    if leading and leading.group(2).upper() in letters:
        letter = leading.group(2).upper()
        # "**A** **B**" names two: a label counts alone on its line only.
        line = text[leading.end() : leading.end() + 500].partition("\n")[0]
        others = {*_distinct(_MARKED, line, letters), *_distinct(_BARE, line, letters)}
        if not others - {letter}:
            return Reading(letter, "the reply starts with it")
    for pattern, what in ((_MARKED, "marked"), (_BARE, "standing alone")):
        found = _distinct(pattern, text, letters)
        if len(found) == 1:
            return Reading(found[0], f"the only letter {what}")
        if len(found) > 1:
            named = " and ".join(found).replace(" and " + TOO_MANY, ", " + TOO_MANY)
            return Reading(
                None, f"ambiguous: the reply names {named} ({what}) and says no answer"
            )
    return Reading(None, f"no choice letter ({', '.join(letters)}) in the reply")


def _last_statement(text: str, letters: str) -> Reading | None:
    last: Reading | None = None
    earlier: set[str] = set()
    for count, match in enumerate(_STATED.finditer(text)):
        if count >= MAX_CANDIDATES:
            return Reading(None, f"more than {MAX_CANDIDATES:,} answer statements")
        group = 2 if match.group(2) else 3
        letter = match.group(group)
        if letter.upper() not in letters:
            continue
        after = text[match.end(group) : match.end(group) + 16]
        if letter.islower() and not match.group(1) and _WORD_AFTER.match(after):
            continue  # "the answer is a bit long": the article
        other = _ALTERNATIVE.match(after)
        if last is not None and last.letter:
            earlier.add(last.letter)
        if other and other.group(1).upper() in letters:
            pair = f"{letter.upper()} and {other.group(1).upper()}"
            last = Reading(None, f"ambiguous: one answer statement names {pair}")
        else:
            end = match.end(group)
            while (
                text[end : end + 1] in (")", "]", "*", "}")
                and end < match.end(group) + 4
            ):
                end += 1
            said = collapse_whitespace(text[match.start() : end])
            last = Reading(letter.upper(), f"stated as {said!r}")
    if last is not None and last.letter is not None:
        earlier.discard(last.letter)
        if earlier:
            also = ", ".join(sorted(earlier))
            last = Reading(last.letter, f"{last.how}, the last of several; also {also}")
    return last


def _distinct(pattern: Any, text: str, letters: str) -> list[str]:
    found: list[str] = []
    for count, match in enumerate(pattern.finditer(text)):
        if count >= MAX_CANDIDATES:
            return [*found, TOO_MANY]  # never one letter: too many to tell
        letter = next(group for group in match.groups() if group).upper()
        if letter not in letters or letter in found:
            continue
        if pattern is _BARE and _not_a_choice(text, match.end(1)):
            continue
        found.append(letter)
        if len(found) > 1:
            break
    return found


def _not_a_choice(text: str, end: int) -> bool:
    """A capital followed by an apostrophe (I'm) or, for A, a lower-case word."""
    if text[end : end + 1] in ("'", "\u2019"):
        return True
    return _ARTICLE_A.match(text, end - 1, end + 16) is not None


def _by_option_text(text: str, options: dict[str, str]) -> Reading | None:
    wanted = _plain(text)
    matches = [letter for letter, option in options.items() if _plain(option) == wanted]
    if len(matches) == 1:
        return Reading(matches[0], "the reply is that option's text")
    return None


def _plain(text: str) -> str:
    return collapse_whitespace(text).strip().rstrip(".").strip().casefold()


def _normalise(text: str) -> str:
    """NFKC (a full-width letter is its ASCII one), a slice at a time."""
    return "".join(unicodedata.normalize("NFKC", piece) for piece in slices(text))


def _shown(letter: str, options: dict[str, str]) -> str:
    option = options.get(letter)
    return f"{letter} ({option[:100]!r})" if option is not None else letter
