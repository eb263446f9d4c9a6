"""Secret values found and replaced in any text that is stored or shown.

An endpoint may echo what it was sent, the key included, and not always as
it was sent: reversed, base64 (standard or URL-safe, at any byte offset),
hex, percent-encoded, as JSON ``\\uXXXX`` or HTML character references, or
with its characters spaced out by whitespace or punctuation. A ``Redactor``
is made once per run (or test request) from the secret values its target
and scorers were given, and replaces each of those forms with a fixed
marker, ``[redacted secret NAME]``, that tells neither the secret's length
nor any part of it.

The forms are RE2 patterns, so a text is scanned in time linear in its
length, as UTF-8 bytes, and RE2 releases the GIL meanwhile: two scans per
piece of a secret, forwards and reversed (a 164-character key and a judge's
key make four).
A structure (a JSON output, an attempt log) is scanned as one text, its
strings joined, and copied with its strings (keys too) replaced only when
something was found. Texts that together are longer than ``INLINE_CHARS``
are redacted in a worker thread (``redacted``), never on the event loop.

A secret shorter than ``MIN_ENCODED_CHARS`` is replaced only where it occurs
as it is: a few characters spaced out or encoded are found in too much
ordinary text. A secret longer than ``PIECE_CHARS`` is matched piece by piece
(none shorter than half that), so each pattern stays small; the markers of a
whole copy become one. One longer than ``MAX_CHARACTER_FORMS`` (a key file)
is replaced as it is, reversed, in base64 (not wrapped) and in hex only.
"""

from __future__ import annotations

import asyncio
import base64
import html.entities
import itertools
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

import re2

if TYPE_CHECKING:
    from runs.plugins import TargetContext

MIN_ENCODED_CHARS = 8
# A secret's characters are matched in pieces of at most this many (the
# longest provider keys are one piece), each pattern given this much memory:
# RE2 then scans a megabyte in a few milliseconds (a larger program leaves its
# automaton too little memory, and RE2 falls back to an engine a hundred
# times slower).
PIECE_CHARS = 200
BANK_MEMORY = 64 << 20
# A longer secret (a key file) is matched as it is, reversed, in base64 (not
# wrapped into lines) and in hex, but not spaced out or encoded character by
# character: its dozens of patterns would cost seconds to build and a scan
# each.
MAX_CHARACTER_FORMS = 1024
# A text ending in this many characters of a secret (or more, but not all of
# it) is taken to be cut inside a copy of it; fewer tell little of a key.
MIN_TAIL_CHARS = 4
# How far from a text's end such a cut copy is looked for: more than the
# longest form of a piece of a secret (200 characters, each a 12-byte escape
# with three 6-byte separators after it).
TAIL_BYTES = 8 * 1024
# Characters between two characters of a spaced-out copy, at most.
MAX_SEPARATORS = 3
# Texts up to this many characters in all are redacted on the event loop
# (tens of microseconds); anything longer goes to a worker thread.
INLINE_CHARS = 16_384
# Strings are joined with this for one scan: no form of a secret matches it,
# so no match spans two strings.
_JOIN = "\x00"

# One character between two of a spaced-out copy: whitespace, ASCII
# punctuation, the Latin-1 and general punctuation blocks (spaces, dashes,
# dots, zero-width characters), CJK and full-width punctuation; one of the
# ASCII ones percent-, JSON- or HTML-encoded; a named character reference;
# an HTML tag. (Whole Unicode classes would make the pattern ten times as
# long to compile; an encoded letter or digit is no separator.)
_PUNCTUATION_HEX = r"(?:0[9ADad]|2[0-9A-Fa-f]|3[A-Fa-f]|40|5[B-Fb-f]|60|7[B-Eb-e])"
_SEPARATOR = (
    r"(?:[\s!-/:-@\[-`{-~\x{00A0}-\x{00BF}\x{00D7}\x{00F7}\x{2000}-\x{206F}"
    r"\x{2190}-\x{21FF}\x{2500}-\x{257F}\x{3000}-\x{303F}\x{FE00}-\x{FE0F}"
    r"\x{FE10}-\x{FE6F}\x{FEFF}\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF20}]"
    rf"|%{_PUNCTUATION_HEX}"
    r"|\\[nrtbfv]"
    rf"|\\u00{_PUNCTUATION_HEX}|\\u200[B-Fb-f]"
    r"|&#0*(?:9|1[03]|3[2-9]|4[0-7]|5[89]|6[0-4]|9[1-6]|12[3-6]|160|820[3-7]);"
    rf"|&#[xX]0*{_PUNCTUATION_HEX};"
    r"|&[A-Za-z]+;"
    r"|</?[A-Za-z][^<>]*>)"
)
_GAP = f"{_SEPARATOR}{{0,{MAX_SEPARATORS}}}"
# Base64 and hex may be wrapped into lines.
_BASE64_GAP = r"(?:\s{1,2}|\\r\\n|\\n)?"
_BASE64_EDGE = r"[A-Za-z0-9+/_-]{0,3}"
_HEX_GAP = r"(?:[\s:,.-]{1,2}|\\n)?(?:0[xX])?"
_URLSAFE = str.maketrans("+/", "-_")
_ADJACENT_MARKERS = re2.compile(
    r"(\[redacted secret [^\]]*\])"
    r"(?:[\s,.:;/|_-]{0,3}[0-9A-Fa-f%&#;xXuU\\]{0,8}[\s,.:;/|_-]{0,3}"
    r"\[redacted secret [^\]]*\])+"
)


def _html_names() -> dict[str, list[str]]:
    names: dict[str, list[str]] = {}
    for name, char in html.entities.html5.items():
        if len(char) == 1:
            names.setdefault(char, []).append(name)
    return names


_HTML_NAMES = _html_names()


def _hex(number: int, width: int) -> str:
    """``number`` in hex, either case."""
    return "".join(
        f"[{digit}{digit.upper()}]" if digit.isalpha() else digit
        for digit in f"{number:0{width}x}"
    )


def _char(char: str) -> str:
    """A pattern for one character of a secret, as it is or encoded."""
    code = ord(char)
    forms = [
        re2.escape(char),
        "".join(f"%{_hex(byte, 2)}" for byte in char.encode()),
        f"&#0*{code};?",
        f"&#[xX]0*{_hex(code, 1)};?",
        rf"\\u\{{0*{_hex(code, 1)}\}}",
    ]
    if code <= 0xFFFF:
        forms.append(rf"\\u{_hex(code, 4)}")
    else:  # JSON writes it as a surrogate pair
        high, low = divmod(code - 0x10000, 0x400)
        forms.append(rf"\\u{_hex(0xD800 + high, 4)}\\u{_hex(0xDC00 + low, 4)}")
    if code <= 0xFF:
        forms.append(rf"\\x{_hex(code, 2)}")
    if not char.isalnum():
        forms.append(r"\\" + re2.escape(char))  # \/ \" \\ and the like
    if char == " ":
        forms.append(r"\+")
    forms.extend("&" + re2.escape(name) for name in _HTML_NAMES.get(char, ()))
    return "(?:" + "|".join(forms) + ")"


def _pieces(text: str, size: int, unit: int = 1) -> list[str]:
    """``text`` cut into pieces of at most ``size`` characters, as equal as
    can be, each a whole number of ``unit``s."""
    units = max(len(text) // unit, 1)
    count = -(-units * unit // size)
    cuts = [unit * (units * i // count) for i in range(count)] + [len(text)]
    return [text[a:b] for a, b in itertools.pairwise(cuts) if a < b]


def _base64_pieces(data: bytes) -> Iterator[tuple[int, int, str]]:
    """The base64 of ``data`` wherever it starts: at each of the three byte
    offsets and in both alphabets, the part that encodes only the secret's
    bytes, cut into pieces: (number of the piece, how many, the piece)."""
    for skip in range(3):
        body = data[skip:]
        body = body[: len(body) // 3 * 3]
        if len(body) < 6:
            continue
        standard = base64.b64encode(body).decode("ascii")
        for encoded in dict.fromkeys((standard, standard.translate(_URLSAFE))):
            pieces = _pieces(encoded, PIECE_CHARS, unit=4)
            for number, piece in enumerate(pieces):
                yield number, len(pieces), piece


def _base64_forms(data: bytes, *, wrapped: bool = True) -> Iterator[str]:
    """The base64 of ``data`` wherever it starts (``_base64_pieces``);
    ``wrapped``, with line breaks anywhere in it."""
    gap = _BASE64_GAP if wrapped else ""
    for number, count, piece in _base64_pieces(data):
        form = gap.join(re2.escape(c) for c in piece)
        # The characters that encode the secret's first and last bytes with
        # their neighbours' go too.
        if number == 0:
            form = _BASE64_EDGE + form
        if number == count - 1:
            form += _BASE64_EDGE + "=*"
        yield form


def _hex_forms(data: bytes) -> Iterator[str]:
    for piece in _pieces(data.hex(), PIECE_CHARS, unit=2):
        pairs = bytes.fromhex(piece)
        yield _HEX_GAP.join(_hex(byte, 2) for byte in pairs)


def _starts(atoms: list[str], gap: str, least: int) -> str | None:
    """A pattern for the first ``least`` or more of ``atoms`` (patterns), one
    ``gap`` between two, but not all of them: a copy cut before its end."""
    if len(atoms) <= least:
        return None
    rest = ""
    for atom in reversed(atoms[least:-1]):
        rest = f"(?:{gap}{atom}{rest})?"
    return gap.join(atoms[:least]) + rest


def tail_forms(value: str) -> list[str]:
    """Patterns of the start of every form of every piece of a secret, found
    only at a text's end (a copy cut there), an ellipsis after it or not."""
    if len(value) < MIN_ENCODED_CHARS:
        return []
    data = value.encode()
    forms: list[str | None] = []
    if len(value) > MAX_CHARACTER_FORMS:
        character, gap = re2.escape, ""
    else:
        character, gap = _char, _GAP
    for piece in _pieces(value, PIECE_CHARS):
        forms.append(_starts([character(c) for c in piece], gap, MIN_TAIL_CHARS))
        forms.append(
            _starts([character(c) for c in reversed(piece)], gap, MIN_TAIL_CHARS)
        )
    for number, _, piece in _base64_pieces(data):
        start = _starts([re2.escape(c) for c in piece], _BASE64_GAP, 6)
        if start and number == 0:
            start = _BASE64_EDGE + start
        forms.append(start)
    for piece in _pieces(data.hex(), PIECE_CHARS, unit=2):
        pairs = [_hex(byte, 2) for byte in bytes.fromhex(piece)]
        forms.append(_starts(pairs, _HEX_GAP, MIN_TAIL_CHARS))
    ending = r"(?:\x{2026}|\.\.\.)?\z"
    return [f"(?:{form}){ending}" for form in forms if form]


def secret_forms(value: str) -> tuple[list[str], list[str]]:
    """The forms of one secret that are replaced, as RE2 patterns: those of its
    characters, spaced out or encoded one by one (two per piece: forwards and
    reversed), and its literal encodings (base64, hex)."""
    if len(value) < MIN_ENCODED_CHARS:
        return [], [re2.escape(value)]
    data = value.encode()
    if len(value) > MAX_CHARACTER_FORMS:
        # A key file rather than a key: as it is, reversed, in base64 (not
        # wrapped) and hex.
        literals = [*_base64_forms(data, wrapped=False), *_hex_forms(data)]
        return [], [re2.escape(value), re2.escape(value[::-1]), *literals]
    literals = [*_base64_forms(data), *_hex_forms(data)]
    characters = []
    for piece in _pieces(value, PIECE_CHARS):
        characters.append(_GAP.join(_char(c) for c in piece))
        characters.append(_GAP.join(_char(c) for c in reversed(piece)))
    return characters, literals


def _options() -> re2.Options:
    options = re2.Options()
    options.max_mem = BANK_MEMORY
    options.log_errors = False
    options.never_capture = True
    return options


def _encode(text: str) -> bytes:
    # Lone surrogates (a JSON "\ud800" decodes to one) pass through as they are.
    return text.encode("utf-8", "surrogatepass")


class _Bank:
    """Forms of one secret, compiled as one alternation, and its marker."""

    __slots__ = ("marker", "pattern")

    def __init__(self, marker: str, forms: list[str]) -> None:
        self.marker = marker.encode()
        self.pattern = re2.compile("|".join(forms), _options())

    def replace(self, data: bytes) -> bytes | None:
        """``data`` with the forms replaced, or None when it holds none."""
        if self.pattern.search(data) is None:
            return None  # the usual case: one scan, nothing copied
        marker = self.marker
        return self.pattern.sub(lambda _: marker, data)


def _detector(banks: list[_Bank], values: list[str]) -> Any:
    """All the banks as one ``re2.Set``, which says whether any matches in one
    scan of a text, where the banks would take one each (a quarter of the
    time for two keys). It finds no span, so it stays as fast with a match.

    A set whose automaton could not be built answers "no match" to any text
    (RE2 does not fall back to a slower engine there): it is used only when
    it finds each secret as it is; otherwise the banks scan alone.
    """
    if len(banks) < 2:
        return None
    detector = re2.Set.SearchSet(_options())
    try:
        for bank in banks:
            detector.Add(bank.pattern.pattern)
        detector.Compile()
    except re2.error:
        return None
    for value in values:
        if not detector.Match(_encode(f"<{value}>")):
            return None
    return detector


class Redactor:
    """Replaces the given secrets, in every form above, in texts and values."""

    __slots__ = ("banks", "cut_copy", "detector", "numeric", "tails")

    def __init__(self, secrets: Iterable[tuple[str, str]] = ()) -> None:
        labels: dict[str, str] = {}
        for label, value in secrets:
            if value and value not in labels:
                labels[value] = label
        # Longer secrets first: one that holds another is replaced whole.
        values = sorted(labels, key=len, reverse=True)
        self.numeric = any(value.isdigit() for value in values)
        # A bank holds at most one form of characters: RE2 finds where a
        # match of two such alternatives begins thirty times more slowly
        # than where one does. Each bank is one more scan of a text.
        self.banks: list[_Bank] = []
        for value in values:
            marker = f"[redacted secret {labels[value]}]"
            characters, literals = secret_forms(value)
            first, others = characters[:1], characters[1:]
            self.banks.append(_Bank(marker, [*filter(None, first), *literals]))
            self.banks.extend(_Bank(marker, [form]) for form in others)
        self.detector = _detector(self.banks, values)
        # One per secret: scanned only over a text's last TAIL_BYTES.
        self.tails = [
            _Bank(f"[redacted secret {labels[value]}]", forms)
            for value in values
            if (forms := tail_forms(value))
        ]
        # All of them in one pattern, to say in one scan that a text ends in
        # none (the usual answer).
        self.cut_copy = (
            re2.compile("|".join(b.pattern.pattern for b in self.tails), _options())
            if self.tails
            else None
        )

    @classmethod
    def of(cls, *contexts: TargetContext | None) -> Redactor:
        """The redactor of the secrets given to plug-ins in these contexts."""
        return cls(
            (key, value)
            for context in contexts
            if context is not None
            for key, value in context.secrets.items()
        )

    def __bool__(self) -> bool:
        return bool(self.banks)

    def text(self, text: str) -> str:
        """``text`` with every form of every secret replaced."""
        if not text or not self.banks:
            return text
        # Scanned as UTF-8 bytes: RE2's own text, with no offsets to map back.
        data = _encode(text)
        if not (self._anywhere(data) or self._cut_copy_at_end(data)):
            return text
        changed = False
        for bank in self.banks:
            replaced = bank.replace(data)
            if replaced is not None:
                data, changed = replaced, True
        for bank in self.tails:
            head, tail = data[:-TAIL_BYTES], data[-TAIL_BYTES:]
            replaced = bank.replace(tail)
            if replaced is not None:
                data, changed = head + replaced, True
        if not changed:
            return text
        if len(self.banks) > 1:
            # A long secret is replaced piece by piece, a marker each: they
            # become one, with what lies between them (a spaced-out copy's
            # separators; the debris of an encoding where a piece's match
            # began a character late, its last digit read as the character).
            data = _ADJACENT_MARKERS.sub(lambda match: match.group(1), data)
        return data.decode("utf-8", "surrogatepass")

    def found_in(self, text: str) -> bool:
        return self._anywhere(_encode(text))

    def _anywhere(self, data: bytes) -> bool:
        """Whether any form of any secret is in ``data``: the usual answer,
        no, in one scan."""
        if self.detector is not None:
            return self.detector.Match(data) is not None
        return any(bank.pattern.search(data) is not None for bank in self.banks)

    def _cut_copy_at_end(self, data: bytes) -> bool:
        if self.cut_copy is None:
            return False
        return self.cut_copy.search(data[-TAIL_BYTES:]) is not None

    def value(self, value: Any) -> Any:
        """``value`` (a JSON-like structure) with every string redacted, keys
        included; the same object when it holds no secret."""
        if not self.banks:
            return value
        if isinstance(value, str):
            return self.text(value)
        texts = list(self._texts(value))
        if not texts or not (
            self.found_in(_JOIN.join(texts))
            or any(self._cut_copy_at_end(_encode(text)) for text in self._values(value))
        ):
            return value
        return self._copy(value)

    def _texts(self, value: Any) -> Iterator[str]:
        if isinstance(value, str):
            yield value
        elif isinstance(value, dict):
            for key, item in value.items():
                if isinstance(key, str):
                    yield key
                yield from self._texts(item)
        elif isinstance(value, list | tuple):
            for item in value:
                yield from self._texts(item)
        elif self.numeric and isinstance(value, int) and not isinstance(value, bool):
            yield str(value)

    def _values(self, value: Any) -> Iterator[str]:
        """The strings of ``value`` but its keys (a text is cut, a key not)."""
        if isinstance(value, str):
            yield value
        elif isinstance(value, dict):
            for item in value.values():
                yield from self._values(item)
        elif isinstance(value, list | tuple):
            for item in value:
                yield from self._values(item)

    def _copy(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {
                self.text(key) if isinstance(key, str) else key: self._copy(item)
                for key, item in value.items()
            }
        if isinstance(value, list | tuple):
            return [self._copy(item) for item in value]
        if self.numeric and isinstance(value, int) and not isinstance(value, bool):
            text = str(value)
            redacted = self.text(text)
            return value if redacted == text else redacted
        return value

    async def redacted(self, value: Any) -> Any:
        """``value()``, in a worker thread unless its texts are short."""
        if not self.banks:
            return value
        if text_chars(value, INLINE_CHARS) <= INLINE_CHARS:
            return self.value(value)
        return await asyncio.to_thread(self.value, value)


def text_chars(value: Any, limit: int) -> int:
    """The characters of the strings in ``value``, counted until past ``limit``
    (a huge structure is not walked through on the event loop)."""
    total = 0
    stack = [value]
    nodes = 0
    while stack and total <= limit:
        item = stack.pop()
        nodes += 1
        if isinstance(item, str):
            total += len(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
            total += sum(len(k) for k in item if isinstance(k, str))
        elif isinstance(item, list | tuple):
            stack.extend(item)
        if nodes > limit // 16:
            return limit + 1  # many small parts: walking them is the cost
    return total


NO_SECRETS = Redactor()
