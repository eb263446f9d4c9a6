"""A queue's rubric: what a reviewer gives, checked; and the consensus of raters.

A rubric is ``{"kind", "labels", "multiple", "criteria", "note",
"show_expected", "pass_at"}``. ``kind`` is ``pass_fail`` ("pass" / "fail"),
``scale`` (1 to 5), ``labels`` (one of ``labels``, or several with
``multiple``) or ``preference`` (a comparison's: "a", "b" or "tie", where
"a" is the queue's run). Each named criterion takes a value of the same kind.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from runs.errors import InvalidInput
from runs.models import RubricKind
from runs.plugins.scorers import MAX_NAME_LENGTH

SCALE = (1, 2, 3, 4, 5)
PASS_FAIL = ("pass", "fail")
PREFERENCE = ("a", "b", "tie")
MAX_LABELS = 9  # one number key each
MAX_CRITERIA = 8
MAX_NOTE = 5_000
DEFAULT_PASS_AT = 4.0
RUBRIC_FIELDS = frozenset(
    {"kind", "labels", "multiple", "criteria", "note", "show_expected", "pass_at"}
)


def _names(value: Any, *, field: str, most: int, longest: int) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InvalidInput("must be a list of names", field=field)
    names = [v.strip() for v in value]
    if any(not name or len(name) > longest for name in names):
        raise InvalidInput(f"each must be 1 to {longest} characters", field=field)
    if len(set(names)) != len(names):
        raise InvalidInput("names a label twice", field=field)
    if len(names) > most:
        raise InvalidInput(f"has {len(names)}; at most {most}", field=field)
    return names


def rubric_clean(
    rubric: Any, *, comparison: bool, scorer_name: str, field: str = "rubric"
) -> dict[str, Any]:
    """The rubric with its defaults, or InvalidInput naming the bad field."""
    rubric = {} if rubric is None else rubric
    if not isinstance(rubric, dict):
        raise InvalidInput("must be an object", field=field)
    unknown = sorted(set(rubric) - RUBRIC_FIELDS)
    if unknown:
        raise InvalidInput("is not a field of a rubric", field=f"{field}.{unknown[0]}")
    default = RubricKind.PREFERENCE if comparison else RubricKind.PASS_FAIL
    kind = rubric.get("kind") or default
    if kind not in RubricKind.values:
        known = ", ".join(RubricKind.values)
        raise InvalidInput(f"must be one of {known}", field=f"{field}.kind")
    if (kind == RubricKind.PREFERENCE) != comparison:
        raise InvalidInput(
            "a comparison's queue asks for a preference, and only it does",
            field=f"{field}.kind",
        )
    labels = _names(rubric.get("labels"), field=f"{field}.labels", most=MAX_LABELS,
                    longest=60)  # fmt: skip
    if kind == RubricKind.LABELS and not labels:
        raise InvalidInput("list the labels to choose from", field=f"{field}.labels")
    room = MAX_NAME_LENGTH - len(scorer_name) - 1
    criteria = _names(rubric.get("criteria"), field=f"{field}.criteria",
                      most=MAX_CRITERIA, longest=max(min(room, 40), 1))  # fmt: skip
    if criteria and room < 1:
        raise InvalidInput("the queue's name leaves no room for criteria", field=field)
    pass_at = rubric.get("pass_at", DEFAULT_PASS_AT)
    if not isinstance(pass_at, int | float) or not 1 <= pass_at <= 5:
        raise InvalidInput("must be a number from 1 to 5", field=f"{field}.pass_at")
    flags = {}
    for name, default_flag in (("multiple", False), ("note", True),
                               ("show_expected", True)):  # fmt: skip
        flag = rubric.get(name, default_flag)
        if not isinstance(flag, bool):
            raise InvalidInput("must be true or false", field=f"{field}.{name}")
        flags[name] = flag
    return {
        "kind": kind,
        "labels": labels if kind == RubricKind.LABELS else [],
        "criteria": criteria,
        "pass_at": float(pass_at),
        **flags,
        "multiple": flags["multiple"] and kind == RubricKind.LABELS,
    }


def value_clean(rubric: dict[str, Any], value: Any, *, field: str) -> Any:
    """One value of the rubric's kind (a label, a score, a side), checked."""
    kind = rubric["kind"]
    if kind == RubricKind.PASS_FAIL and value in PASS_FAIL:
        return value
    if kind == RubricKind.PREFERENCE and value in PREFERENCE:
        return value
    if kind == RubricKind.SCALE and type(value) is int and value in SCALE:
        return value
    if kind == RubricKind.LABELS:
        labels = rubric["labels"]
        if rubric["multiple"]:
            if isinstance(value, list) and all(v in labels for v in value):
                return sorted(set(value), key=labels.index)
            raise InvalidInput(f"must be a list of {', '.join(labels)}", field=field)
        if value in labels:
            return value
        raise InvalidInput(f"must be one of {', '.join(labels)}", field=field)
    expected = {
        RubricKind.PASS_FAIL: '"pass" or "fail"',
        RubricKind.SCALE: "a whole number from 1 to 5",
        RubricKind.PREFERENCE: '"a", "b" or "tie"',
    }[RubricKind(kind)]
    raise InvalidInput(f"must be {expected}", field=field)


def criteria_clean(
    rubric: dict[str, Any], criteria: Any, *, field: str
) -> dict[str, Any]:
    """A value for some of the rubric's criteria, by name."""
    criteria = {} if criteria is None else criteria
    if not isinstance(criteria, dict):
        raise InvalidInput("must be an object of criterion: value", field=field)
    unknown = sorted(set(criteria) - set(rubric["criteria"]))
    if unknown:
        raise InvalidInput(
            "is not a criterion of this queue", field=f"{field}.{unknown[0]}"
        )
    return {
        name: value_clean(rubric, criteria[name], field=f"{field}.{name}")
        for name in rubric["criteria"]
        if name in criteria and criteria[name] is not None
    }


@dataclass(frozen=True, slots=True)
class Consensus:
    """What an item's raters agree on, as a score: ``tie`` when they split evenly."""

    value: float | None
    passed: bool | None
    label: Any
    raters: int
    tie: bool = False
    settled: bool = False  # by an adjudicator's label

    @property
    def reason(self) -> str:
        if self.settled:
            return f"adjudicated: {self.label}"
        raters = f"{self.raters} rater{'s' if self.raters != 1 else ''}"
        if self.tie:
            return f"tie between raters: {self.label} ({raters})"
        return f"{self.label} ({raters})"


def _majority(values: Sequence[Any]) -> tuple[Any, int, bool]:
    """The most frequent value, its count, and whether another is as frequent."""
    counts = Counter(values).most_common()
    top, count = counts[0]
    tie = len(counts) > 1 and counts[1][1] == count
    if tie:
        top = " / ".join(sorted(str(v) for v, c in counts if c == count))
    return top, count, tie


def consensus(rubric: dict[str, Any], values: Sequence[Any]) -> Consensus | None:
    """The consensus of the raters' values (None when none has labelled).

    pass/fail and labels: the majority, ties marked; a scale: the mean (it
    passes at ``pass_at``); several labels: those more than half the raters
    chose; a preference: from the queue's run's side ("a").
    """
    values = [v for v in values if v is not None]
    if not values:
        return None
    n, kind = len(values), rubric["kind"]
    if kind == RubricKind.SCALE:
        mean = sum(values) / n
        return Consensus(mean, mean >= rubric["pass_at"], f"mean {mean:.2f}", n)
    if kind == RubricKind.LABELS and rubric["multiple"]:
        chosen = Counter(label for value in values for label in value)
        kept = [label for label in rubric["labels"] if chosen[label] * 2 > n]
        tie = any(chosen[label] * 2 == n for label in rubric["labels"])
        share = sum(chosen[label] for label in kept) / (n * len(kept)) if kept else 0.0
        return Consensus(share, None, ", ".join(kept) or "no label", n, tie)
    top, count, tie = _majority(values)
    if kind == RubricKind.PASS_FAIL:
        passing = sum(v == "pass" for v in values) / n
        return Consensus(passing, None if tie else top == "pass", top, n, tie)
    if kind == RubricKind.PREFERENCE:
        wins = sum({"a": 1.0, "b": 0.0, "tie": 0.5}[v] for v in values) / n
        passed = None if tie or top == "tie" else top == "a"
        return Consensus(wins, passed, _side_label(top), n, tie)
    return Consensus(count / n, None, top, n, tie)


def adjudicated(rubric: dict[str, Any], value: Any) -> Consensus | None:
    """The consensus an adjudicator's label settles on (None without one)."""
    found = consensus(rubric, [value])
    if found is None:
        return None
    return replace(found, settled=True)


def _side_label(top: Any) -> str:
    names = {"a": "this run preferred", "b": "the other run preferred", "tie": "tie"}
    return names.get(top, str(top))


def mirrored(found: Consensus) -> Consensus:
    """A preference's consensus as the other run sees it."""
    passed = None if found.passed is None else not found.passed
    value = None if found.value is None else 1.0 - found.value
    label = {
        "this run preferred": "the other run preferred",
        "the other run preferred": "this run preferred",
    }.get(str(found.label), found.label)
    return Consensus(value, passed, label, found.raters, found.tie, found.settled)
