"""Benchmark layouts read as items: MATH and GSM8K.

Each turns a source record into one with ``input`` and ``expected`` (the
default field mapping), keeping what else the record holds as metadata:

- ``math`` (Hendrycks et al.): ``problem`` is the input; the expected answer
  is the content of the solution's last ``\\boxed{...}`` (or ``\\fbox{...}``)
  whose braces balance; ``solution``, ``level``, ``type`` and any other field
  stay as they are, in metadata.
- ``gsm8k`` (Cobbe et al.): ``question`` is the input; the expected answer is
  the text after ``####`` in ``answer``, stripped, with the thousands commas
  of a number removed (``1,200`` is ``1200``); ``answer``, with its
  reasoning, stays in metadata.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

from runs.datasets.importers.parsers import Records, Where, kind_of

LAYOUTS = ("math", "gsm8k")
_BRACES = re.compile(r"\\(?:boxed|fbox)\s*\{|[{}]")
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")


def last_boxed(text: str) -> str | None:
    """The content of the last ``\\boxed{...}`` of ``text`` whose braces balance.

    One pass over the braces, as MATH's own answer extraction counts them
    (escaped ``\\{`` too: they come in pairs), however many boxes never close.
    """
    open_at: list[int | None] = []  # per open brace: where a box's content starts
    last: tuple[int, int] | None = None
    for match in _BRACES.finditer(text):
        token = match.group()
        if token == "}":
            start = open_at.pop() if open_at else None
            if start is not None and (last is None or start > last[0]):
                last = (start, match.start())
        else:
            open_at.append(match.end() if token != "{" else None)
    return None if last is None else text[last[0] : last[1]].strip()


def gsm8k_answer(text: str) -> str | None:
    """The final answer of a GSM8K solution: after ``####``, commas of numbers out."""
    _, marker, final = text.rpartition("####")
    if not marker:
        return None
    return _THOUSANDS.sub("", final.strip())


def _text_field(where: Where, record: dict[str, Any], name: str, layout: str) -> str:
    if name not in record:
        raise where.error(f"the {layout} layout needs this field", field=name)
    value = record[name]
    if not isinstance(value, str):
        raise where.error(f"must be a string, not {kind_of(value)}", field=name)
    if not value.strip():
        raise where.error("must not be empty", field=name)
    return value


def _free(where: Where, record: dict[str, Any], layout: str) -> None:
    for name in ("input", "expected"):
        if name in record:
            raise where.error(
                f"the {layout} layout makes this field itself; rename it", field=name
            )


def _math(where: Where, record: dict[str, Any]) -> dict[str, Any]:
    problem = _text_field(where, record, "problem", "MATH")
    solution = _text_field(where, record, "solution", "MATH")
    answer = last_boxed(solution)
    if not answer:
        raise where.error(
            "has no \\boxed{...} answer with balanced braces", field="solution"
        )
    _free(where, record, "MATH")
    rest = {key: value for key, value in record.items() if key != "problem"}
    return {"input": problem, "expected": answer, **rest}


def _gsm8k(where: Where, record: dict[str, Any]) -> dict[str, Any]:
    question = _text_field(where, record, "question", "GSM8K")
    answer = gsm8k_answer(_text_field(where, record, "answer", "GSM8K"))
    if not answer:
        raise where.error(
            "has no final answer after '####'"
            if answer is None
            else "has nothing after '####'",
            field="answer",
        )
    _free(where, record, "GSM8K")
    rest = {key: value for key, value in record.items() if key != "question"}
    return {"input": question, "expected": answer, **rest}


_MAKERS = {"math": _math, "gsm8k": _gsm8k}


def layout_records(
    read: Callable[[], Records], layout: str
) -> Callable[[], Iterator[tuple[Where, Any]]]:
    """The records of ``read`` made into items of ``layout``."""
    make = _MAKERS[layout]

    def records() -> Iterator[tuple[Where, Any]]:
        for where, record in read():
            if not isinstance(record, dict):
                raise where.error(f"expected an object, got {kind_of(record)}")
            yield where, make(where, record)

    return records
