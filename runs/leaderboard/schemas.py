"""The API schemas of a leaderboard of runs."""

from __future__ import annotations

from typing import Any

from ninja import Field, Schema

from runs.compare.schemas import PAIRED_BY, UNCALIBRATED_JUDGES
from runs.leaderboard.ranking import ALPHA, RANK_RULE
from runs.review.calibration import uncalibrated_judges


class StandingOut(Schema):
    run: int
    rank: int = Field(description=RANK_RULE)
    tied: bool = Field(description="another run has the same rank (shown as 1=)")
    figure: float | None = Field(
        description="pass rate, or mean (numeric scorers), over the shared items"
    )
    interval: list[float] | None = Field(
        description=(
            "95% interval of figure: wilson (pass/fail, one verdict per item) or "
            "normal_item_means (each item one observation: numeric scorers, or "
            "items whose epochs disagree)"
        )
    )
    beaten_by: list[int] = Field(description="runs significantly better than this one")


class PairTestOut(Schema):
    first: int
    second: int
    delta: float = Field(description="second's figure minus first's")
    test: str = Field(description="mcnemar_exact, or the comparison's numeric test")
    p_value: float
    p_value_adjusted: float = Field(
        description="Holm-adjusted across this scorer's pairs of runs"
    )
    significant: bool = Field(description=f"p_value_adjusted < {ALPHA}")


class ScorerBoardOut(Schema):
    scorer: str
    measure: str = Field(description="pass_rate, or mean (numeric scorers)")
    items: int = Field(
        description=(
            "items every run has a score of this scorer for (not skipped by its "
            "condition); every figure and test is over these"
        )
    )
    interval: str | None
    omnibus_test: str | None = Field(
        description=(
            "cochrans_q (pass/fail, one verdict per item) or friedman (numeric, "
            "or items whose epochs disagree; three runs or more)"
        )
    )
    statistic: float | None
    p_value: float | None = Field(description="the omnibus test's (chi-square)")
    pairwise_test: str | None = Field(
        description=(
            "the pairs' test, or their tests comma-separated when they differ "
            "(the sign-flip test's method follows each pair's sample)"
        )
    )
    standings: list[StandingOut] = Field(description="by rank, then figure")
    pairs: list[PairTestOut]


class LeaderboardOut(Schema):
    runs: list[int]
    paired_by: str = Field(description=PAIRED_BY)
    rank_rule: str = Field(default=RANK_RULE)
    scorers: list[ScorerBoardOut]
    uncalibrated_judges: dict[str, str] = Field(description=UNCALIBRATED_JUDGES)

    @staticmethod
    def resolve_runs(obj: Any) -> list[int]:
        return [run.pk for run in obj.runs]

    @staticmethod
    def resolve_uncalibrated_judges(obj: Any) -> dict[str, str]:
        notes = uncalibrated_judges(obj.runs, [s.scorer for s in obj.scorers])
        return {note.scorer: note.gap for note in notes}

    @staticmethod
    def resolve_rank_rule(obj: Any) -> str:
        return RANK_RULE
