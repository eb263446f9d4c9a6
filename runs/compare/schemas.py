"""The API schemas of a comparison of runs."""

from __future__ import annotations

from typing import Any

from ninja import Field, Schema

from runs.review.calibration import uncalibrated_judges

# Shared with the leaderboard, which pairs and warns the same way.
PAIRED_BY = "item, or external_id across versions"
UNCALIBRATED_JUDGES = (
    "the scorers whose verdicts rest on an llm_judge not calibrated "
    "against people (human: scores), and why"
)


class ScorerComparisonOut(Schema):
    """One (candidate, scorer) against the baseline, over the paired items."""

    scorer: str
    candidate: int
    paired: int = Field(
        description="items with results in both runs, this scorer's not skipped"
    )
    unpaired: int = Field(description="items with results in only one of the two")
    skipped: int = Field(
        description=(
            "items with results in both runs whose score of this scorer was "
            "skipped by its condition (every epoch) in either: not paired"
        )
    )
    stopped: int = Field(
        0,
        description=(
            "items with results in both runs stopped in flight (every epoch "
            "not skipped) in either: the call was cut short because the run "
            "stopped (a cancel, fail fast, the deadline, the cost budget). No "
            "sample: not paired, not in unpaired. A call that ran out of its "
            "own timeout stays a failure"
        ),
    )
    measure: str = Field(
        description="what delta is of: pass_rate, or mean (numeric scorers)"
    )
    baseline_pass_rate: float | None
    candidate_pass_rate: float | None
    baseline_mean: float | None
    candidate_mean: float | None
    delta: float | None = Field(description="candidate minus baseline")
    delta_ci: list[float] | None = Field(
        description=(
            "interval of delta at the row's Holm-adjusted level (confidence "
            "ci_level): it excludes 0 exactly when the verdict is better or "
            "worse; null when unbounded (too few items)"
        )
    )
    interval: str | None = Field(
        description=(
            "how delta_ci is computed: mcnemar_exact_inverted (pass/fail), "
            "sign_flip_inverted (numeric, or epochs that disagree: the exact "
            "or Monte Carlo test inverted) or sign_flip_normal_inverted (its "
            "normal approximation inverted)"
        )
    )
    ci_level: float | None = Field(
        description="confidence of delta_ci: 1 - alpha x p_value / p_value_adjusted"
    )
    both_passed: int
    regressions: int = Field(description="passed in the baseline, not the candidate")
    improvements: int = Field(description="passed in the candidate, not the baseline")
    both_failed: int
    test: str | None = Field(
        description=(
            "mcnemar_exact (pass/fail), or the paired sign-flip permutation "
            "test over items: sign_flip_exact (every sign vector), "
            "sign_flip_normal (from 10,000 effective items, (sum d^2)^2 / "
            "sum d^4: the normal approximation of the sign vectors' sums, mean "
            "0, variance sum d^2, continuity corrected by the smallest |d|) or "
            "sign_flip_monte_carlo (random sign vectors, fixed seed)"
        )
    )
    p_value: float | None
    p_value_adjusted: float | None = Field(
        description="Holm-adjusted across every (candidate, scorer) of the answer"
    )
    verdict: str = Field(
        description="better, worse or no_significant_difference (alpha 0.05)"
    )
    mde: float | None = Field(
        description=(
            "minimum detectable effect at 80% power at the row's Holm-adjusted "
            "level, when there is no significant difference"
        )
    )


class ComparisonOut(Schema):
    baseline: int
    candidates: list[int]
    paired_by: str = Field(description=PAIRED_BY)
    unpaired: int = Field(
        description="items with results in some of the runs but not in all"
    )
    scorers: list[ScorerComparisonOut]
    uncalibrated_judges: dict[str, str] = Field(description=UNCALIBRATED_JUDGES)

    @staticmethod
    def resolve_baseline(obj: Any) -> int:
        return obj.baseline.pk

    @staticmethod
    def resolve_uncalibrated_judges(obj: Any) -> dict[str, str]:
        runs = [*obj.candidates, obj.baseline]
        notes = uncalibrated_judges(runs, [row.scorer for row in obj.scorers])
        return {note.scorer: note.gap for note in notes}

    @staticmethod
    def resolve_candidates(obj: Any) -> list[int]:
        return [run.pk for run in obj.candidates]


class PlanOut(Schema):
    """Items needed to detect a difference of pass rates, after Holm."""

    candidate: int | None = Field(description="the comparison's row planned from")
    scorer: str | None
    pass_rate: float = Field(description="the baseline's pass rate")
    delta: float = Field(description="the difference of pass rates to detect")
    discordance: float = Field(
        description=(
            "share of items whose verdict differs between the runs (regressions "
            "+ improvements); from the comparison: observed, at least |delta|"
        )
    )
    comparisons: int = Field(description="m: Holm's family (the comparison's rows)")
    power: float
    alpha: float
    level: float = Field(description="alpha / m: Holm's strictest step")
    items: int | None = Field(
        description=(
            "paired items at which the exact power first reaches the target "
            "(power(items) >= power > power(items - 1)); null beyond 10,000,000"
        )
    )
    achieved_power: float | None = Field(description="exact power at items")
    method: str = Field(
        description=(
            "mcnemar_exact_enumeration: the exact test's power, summed over the "
            "discordant counts"
        )
    )
    paired: int | None = Field(description="the comparison's paired items")
    power_at_paired: float | None = Field(
        description="the exact power the comparison had for delta at level"
    )
    mde: float | None = Field(
        description=(
            "the comparison's own minimum detectable effect at 80% power (null "
            "when it found a significant difference)"
        )
    )
