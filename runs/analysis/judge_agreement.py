"""A judge's verdicts against people's: kappa, confusion, precision and recall
of its failures, and whether it is stricter or laxer than they are.

Pure functions over two sequences of verdicts (True passed, False failed,
None not judged), aligned by item. Failure is the positive class: a judge is
used to find the failures.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from runs.analysis.agreement import (
    BOOTSTRAP,
    CONFIDENCE,
    Estimate,
    bootstrap,
    cohen_batch,
    cohen_from,
    kappa_weights,
)
from runs.analysis.compare.significance import mcnemar_exact

Direction = Literal["stricter", "laxer", "even"]
# The significance under which an asymmetry is called stricter or laxer.
SIGNIFICANCE = 0.05


@dataclass(frozen=True, slots=True)
class Confusion:
    """Counts of (judge, people) verdict pairs; failure is the positive class."""

    both_fail: int  # true positives
    judge_fails_people_pass: int  # false positives
    judge_passes_people_fail: int  # false negatives
    both_pass: int  # true negatives

    @property
    def total(self) -> int:
        return (
            self.both_fail
            + self.judge_fails_people_pass
            + self.judge_passes_people_fail
            + self.both_pass
        )


@dataclass(frozen=True, slots=True)
class JudgeAgreement:
    """How a judge agrees with people over the items both judged.

    ``direction`` is "stricter" when the judge fails significantly more items
    than people do (McNemar's exact test on the items they disagree on, at
    ``SIGNIFICANCE``), "laxer" when it fails significantly fewer, else "even";
    ``leaning`` says which way the disagreements go regardless of the test.
    """

    items: int
    kappa: Estimate
    agreement: float | None
    confusion: Confusion
    precision: float | None  # of the judge's failures, the share people failed
    recall: float | None  # of the people's failures, the share the judge failed
    judge_fail_rate: float | None
    people_fail_rate: float | None
    direction: Direction
    leaning: Direction
    p_value: float


def judge_against_people(
    judge: Sequence[bool | None],
    people: Sequence[bool | None],
    *,
    replicates: int = BOOTSTRAP,
    seed: int = 0,
    confidence: float = CONFIDENCE,
) -> JudgeAgreement:
    """The judge's agreement with people over the items both gave a verdict."""
    if len(judge) != len(people):
        raise ValueError(
            f"people: {len(people)} verdicts, but the judge has {len(judge)}"
        )
    pairs = [
        (bool(j), bool(p))
        for j, p in zip(judge, people, strict=True)
        if j is not None and p is not None
    ]
    both_fail = sum(1 for j, p in pairs if not j and not p)
    stricter = sum(1 for j, p in pairs if not j and p)
    laxer = sum(1 for j, p in pairs if j and not p)
    both_pass = len(pairs) - both_fail - stricter - laxer
    confusion = Confusion(both_fail, stricter, laxer, both_pass)
    # Cohen's kappa over the 2 x 2 table (categories fail, pass), per item.
    cells = np.zeros((len(pairs), 4))
    for row, (j, p) in enumerate(pairs):
        cells[row, int(j) * 2 + int(p)] = 1.0
    weights = kappa_weights(2, None)
    kappa = bootstrap(
        "cohen_kappa",
        cells,
        lambda sums: cohen_from(sums, weights),
        batch=lambda sums: cohen_batch(sums, weights),
        replicates=replicates,
        seed=seed,
        confidence=confidence,
    )
    n = len(pairs)
    judge_fails = both_fail + stricter
    people_fail = both_fail + laxer
    # Symmetric at one half: which side counts as improvements is no matter.
    p_value = mcnemar_exact(regressions=stricter, improvements=laxer)
    leaning: Direction = (
        "stricter" if stricter > laxer else "laxer" if laxer > stricter else "even"
    )
    return JudgeAgreement(
        items=n,
        kappa=kappa,
        agreement=(both_fail + both_pass) / n if n else None,
        confusion=confusion,
        precision=both_fail / judge_fails if judge_fails else None,
        recall=both_fail / people_fail if people_fail else None,
        judge_fail_rate=judge_fails / n if n else None,
        people_fail_rate=people_fail / n if n else None,
        direction=leaning if p_value < SIGNIFICANCE else "even",
        leaning=leaning,
        p_value=p_value,
    )


def calibration_gap(
    result: JudgeAgreement, kappa_threshold: float, min_items: int
) -> str:
    """Why the judge is not calibrated ("" when it is)."""
    if result.items < min_items:
        return (
            f"{result.items} items judged by both the judge and people, "
            f"fewer than the {min_items} required"
        )
    value = result.kappa.value
    if value is None:
        return f"kappa is undefined: {result.kappa.undefined}"
    if value < kappa_threshold:
        return f"kappa {value:.2f} is under the threshold {kappa_threshold:.2f}"
    return ""


def calibrated(result: JudgeAgreement, kappa_threshold: float, min_items: int) -> bool:
    """A judge is calibrated when its kappa against people reaches the
    threshold over at least ``min_items`` items."""
    return not calibration_gap(result, kappa_threshold, min_items)
