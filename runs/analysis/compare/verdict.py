"""Every (candidate, scorer) of a comparison: its figures, its test, its verdict.

- A result whose target call failed or ran out of its own timeout, or whose
  score errored, counts as not passed, with value 0: it is what the user got.
- A score skipped by its condition (a scorer that runs only when another
  passed or failed) is neither passed nor failed, as in a run's summary: that
  result leaves the item's epochs for that scorer. An item whose every epoch
  is skipped in either run is not a pair for that scorer; it is counted in the
  scorer row's ``skipped``, not in ``paired`` nor in ``unpaired``.
- A result stopped in flight (its call cut short because its run stopped: a
  cancel, fail fast, the deadline, the cost budget) is no sample: neither
  passed nor failed, it leaves the item's epochs like a skipped one. An item
  with no other epoch in either run is not a pair; it is counted in the row's
  ``stopped``, not in ``paired``, ``skipped`` nor ``unpaired``. A call that
  ran out of its own timeout stays a failure.
- With several epochs an item's score is its mean over epochs: its pass
  fraction and its mean value. Pass rates are the mean of the items' pass
  fractions (with one epoch: passed items / paired items).
- The verdict reads the Holm-adjusted p-value (``significance``) at alpha
  0.05. The interval and the minimum detectable effect are at the row's Holm
  level (``ci_level`` is the interval's confidence), so the interval excludes
  0 exactly when the verdict is better or worse.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from runs.analysis.compare import signflip, significance
from runs.analysis.compare.pairing import (
    PairedTable,
    ScannedScorer,
    comparison_pairing,
    one_result_each,
    paired_differences,
    paired_table,
    shared_scorers,
    single_scan,
    unpaired_count,
)
from runs.analysis.compare.signflip import SignFlip, sign_flip_test
from runs.models import Run
from runs.records import cache_keys, single_flight

CACHE_SECONDS = 600

TEST_MCNEMAR = "mcnemar_exact"
TEST_SIGN_FLIP_EXACT = "sign_flip_exact"
TEST_SIGN_FLIP_DRAWN = "sign_flip_monte_carlo"
TEST_SIGN_FLIP_NORMAL = "sign_flip_normal"
INTERVAL_MCNEMAR = "mcnemar_exact_inverted"
INTERVAL_SIGN_FLIP = "sign_flip_inverted"
INTERVAL_SIGN_FLIP_NORMAL = "sign_flip_normal_inverted"
# The sign-flip test's name by how its sign vectors are counted, and its
# interval's (the test inverted).
SIGN_FLIP_TESTS = {
    signflip.EXACT: TEST_SIGN_FLIP_EXACT,
    signflip.DRAWN: TEST_SIGN_FLIP_DRAWN,
    signflip.NORMAL: TEST_SIGN_FLIP_NORMAL,
}
SIGN_FLIP_INTERVALS = {
    signflip.EXACT: INTERVAL_SIGN_FLIP,
    signflip.DRAWN: INTERVAL_SIGN_FLIP,
    signflip.NORMAL: INTERVAL_SIGN_FLIP_NORMAL,
}
# Names of the methods before the sign-flip test and the inverted intervals.
TEST_BOOTSTRAP = "paired_bootstrap"
INTERVAL_NEWCOMBE = "newcombe_paired"
INTERVAL_BOOTSTRAP = "bootstrap_percentile"

BETTER = "better"
WORSE = "worse"
NO_DIFFERENCE = "no_significant_difference"


@dataclass(frozen=True, slots=True)
class ScorerComparison:
    scorer: str
    candidate: int
    paired: int
    unpaired: int
    skipped: int  # items in both runs whose score is skipped in either
    stopped: int  # items in both runs stopped in flight in either: no pair
    measure: str  # "pass_rate" or "mean" (numeric scorers): what delta is of
    baseline_pass_rate: float | None
    candidate_pass_rate: float | None
    baseline_mean: float | None
    candidate_mean: float | None
    delta: float | None
    delta_ci: tuple[float, float] | None
    interval: str | None
    ci_level: float | None  # the confidence of delta_ci: 1 - the row's Holm level
    both_passed: int
    regressions: int
    improvements: int
    both_failed: int
    test: str | None
    p_value: float | None
    p_value_adjusted: float | None
    verdict: str
    mde: float | None

    def as_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}


@dataclass(frozen=True, slots=True)
class Comparison:
    baseline: Run
    candidates: list[Run]
    paired_by: str
    unpaired: int
    scorers: list[ScorerComparison]


# A row before Holm's adjustment, with the sign-flip test its interval and
# detectable effect are computed from once the row's level is known.
Tested = tuple[ScorerComparison, SignFlip | None]


def _scorer_comparison(
    *, baseline: Run, candidate: Run, scorer: str, paired_by: str
) -> Tested:
    table = paired_table(
        baseline=baseline, candidate=candidate, scorer=scorer, paired_by=paired_by
    )

    def differences(column: str) -> tuple[np.ndarray, np.ndarray]:
        return paired_differences(
            baseline=baseline,
            candidate=candidate,
            scorer=scorer,
            paired_by=paired_by,
            column=column,
        )

    return _tested(table, differences, scorer=scorer, candidate=candidate)


def _tested(
    table: PairedTable,
    differences: Callable[[str], tuple[np.ndarray, np.ndarray]],
    *,
    scorer: str,
    candidate: Run,
) -> Tested:
    """One (candidate, scorer) row from its paired table; ``differences(column)``
    gives the per-item differences when the sign-flip test needs them."""
    n = table.paired
    numeric = table.graded_scores > 0
    row: dict[str, Any] = {
        "scorer": scorer,
        "candidate": candidate.pk,
        "paired": n,
        "unpaired": table.unpaired,
        "skipped": table.skipped,
        "stopped": table.stopped,
        "measure": "mean" if numeric else "pass_rate",
        "both_passed": table.both_passed,
        "regressions": table.regressions,
        "improvements": table.improvements,
        "both_failed": table.both_failed,
        "baseline_pass_rate": table.baseline_pass_sum / n if n else None,
        "candidate_pass_rate": table.candidate_pass_sum / n if n else None,
        "baseline_mean": table.baseline_value_sum / n if n else None,
        "candidate_mean": table.candidate_value_sum / n if n else None,
        "delta": None,
        "delta_ci": None,
        "interval": None,
        "ci_level": None,
        "test": None,
        "p_value": None,
        "mde": None,
        "p_value_adjusted": None,
        "verdict": NO_DIFFERENCE,
    }
    if n == 0:
        return ScorerComparison(**row), None
    # delta is the difference of the figures shown, exactly.
    if numeric:
        row["delta"] = row["candidate_mean"] - row["baseline_mean"]
    else:
        row["delta"] = row["candidate_pass_rate"] - row["baseline_pass_rate"]
    if not numeric and table.split_items == 0:
        row.update(
            interval=INTERVAL_MCNEMAR,
            test=TEST_MCNEMAR,
            p_value=significance.mcnemar_exact(
                regressions=table.regressions, improvements=table.improvements
            ),
        )
        return ScorerComparison(**row), None
    values, counts = differences("total" if numeric else "passes")
    flip = sign_flip_test(values, counts)
    row.update(
        interval=SIGN_FLIP_INTERVALS[flip.method],
        test=SIGN_FLIP_TESTS[flip.method],
        p_value=flip.p_value,
    )
    return ScorerComparison(**row), flip


def _at_level(
    row: ScorerComparison, flip: SignFlip | None, level: float, *, verdict: str
) -> dict[str, Any]:
    """The row's interval and detectable effect at its Holm level; the effect
    the test could have seen matters only when it saw none."""
    seen = verdict != NO_DIFFERENCE
    if flip is not None:
        return {
            "delta_ci": flip.interval(alpha=level),
            "mde": None if seen else significance.sign_flip_mde(test=flip, alpha=level),
        }
    mde = None
    if not seen:
        mde = significance.mcnemar_mde(
            paired=row.paired,
            discordant=row.regressions + row.improvements,
            alpha=level,
        )
    return {
        "delta_ci": significance.mcnemar_interval(
            both_passed=row.both_passed,
            regressions=row.regressions,
            improvements=row.improvements,
            both_failed=row.both_failed,
            alpha=level,
        ),
        "mde": mde,
    }


def _with_verdicts(rows: list[Tested]) -> list[ScorerComparison]:
    tested = [i for i, (row, _) in enumerate(rows) if row.p_value is not None]
    adjusted = significance.holm_adjust(
        [p for i in tested if (p := rows[i][0].p_value) is not None]
    )
    out = [row for row, _ in rows]
    for i, p_adjusted in zip(tested, adjusted, strict=True):
        row, flip = rows[i]
        assert row.p_value is not None and row.delta is not None
        verdict = NO_DIFFERENCE
        if p_adjusted < significance.ALPHA and row.delta:
            verdict = BETTER if row.delta > 0 else WORSE
        level = significance.holm_level(p_value=row.p_value, p_adjusted=p_adjusted)
        values = row.as_dict() | _at_level(row, flip, level, verdict=verdict)
        values |= {
            "p_value_adjusted": p_adjusted,
            "verdict": verdict,
            "ci_level": 1 - level,
        }
        out[i] = ScorerComparison(**values)
    return out


def compare_runs(*, baseline: Run, candidates: Sequence[Run]) -> Comparison:
    """Every (candidate, shared scorer) against the baseline, Holm-adjusted."""
    paired_by = comparison_pairing(baseline=baseline, candidates=candidates)
    rows = [
        row
        for candidate in candidates
        for row in _candidate_rows(baseline, candidate, paired_by)
    ]
    if len(candidates) == 1 and rows:
        unpaired = rows[0][0].unpaired  # the same count, from the paired table
    else:
        unpaired = unpaired_count(baseline, candidates, paired_by)
    return Comparison(
        baseline=baseline,
        candidates=list(candidates),
        paired_by=paired_by,
        unpaired=unpaired,
        scorers=_with_verdicts(rows),
    )


def _candidate_rows(baseline: Run, candidate: Run, paired_by: str) -> list[Tested]:
    scorers = shared_scorers(baseline, candidate)
    if not one_result_each(paired_by, baseline, candidate):
        return [
            _scorer_comparison(
                baseline=baseline,
                candidate=candidate,
                scorer=scorer,
                paired_by=paired_by,
            )
            for scorer in scorers
        ]
    scanned = single_scan(baseline=baseline, candidate=candidate, scorers=scorers)

    def tested(one: ScannedScorer, scorer: str) -> Tested:
        # One epoch: an item's pass fraction is 0 or 1, so only the values'
        # differences are ever drawn from (numeric scorers).
        return _tested(
            one.table,
            lambda column: (one.values, one.counts),
            scorer=scorer,
            candidate=candidate,
        )

    return [tested(scanned[scorer], scorer) for scorer in scorers]


def compare_runs_cached(*, baseline: Run, candidates: Sequence[Run]) -> Comparison:
    """``compare_runs``, kept under the runs' ``results_version``."""
    key = cache_keys.comparison((baseline, *candidates))

    def compute() -> tuple[Any, ...]:
        comparison = compare_runs(baseline=baseline, candidates=candidates)
        return comparison.paired_by, comparison.unpaired, comparison.scorers

    paired_by, unpaired, rows = single_flight.cached(key, compute, CACHE_SECONDS)
    return Comparison(baseline, list(candidates), paired_by, unpaired, rows)
