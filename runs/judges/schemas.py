"""The API schemas of LLM judges measured against people."""

from __future__ import annotations

from ninja import Field, Schema

from runs.web.schemas import BodyIn


class ConfusionOut(Schema):
    """Failure is the positive class: a judge is used to find failures."""

    both_fail: int = Field(description="true positives")
    judge_fails_people_pass: int = Field(description="false positives")
    judge_passes_people_fail: int = Field(description="false negatives")
    both_pass: int = Field(description="true negatives")


class JudgeHumanOut(Schema):
    judge: str = Field(description="the run's llm_judge scorer")
    human: str | None = Field(
        description="the human scorer (human:<queue>); null when the run has none"
    )
    calibrated: bool
    gap: str = Field(description="why the judge is not calibrated (empty when it is)")
    items: int = Field(description="results both the judge and people gave a verdict")
    kappa: float | None = Field(description="Cohen's kappa; null when undefined")
    kappa_undefined: str = Field(description="why kappa is undefined, if it is")
    kappa_interval: list[float] | None = Field(
        description="percentile bootstrap interval of kappa over the results"
    )
    confidence: float
    agreement: float | None = Field(description="share of results they agree on")
    confusion: ConfusionOut | None
    precision: float | None = Field(
        description="of the judge's failures, the share people failed too"
    )
    recall: float | None = Field(
        description="of the people's failures, the share the judge failed too"
    )
    judge_fail_rate: float | None
    people_fail_rate: float | None
    direction: str | None = Field(
        description="stricter or laxer when the judge fails significantly more or "
        "fewer results than people (McNemar's exact test, p < 0.05), else even"
    )
    leaning: str | None = Field(description="which way the disagreements go")
    p_value: float | None = Field(description="McNemar's exact test")


class JudgeAgreementOut(Schema):
    run: int
    kappa_threshold: float = Field(description="the project's threshold of kappa")
    min_items: int = Field(description="the project's minimum of items")
    judges: list[JudgeHumanOut]


class JudgeThresholdsIn(BodyIn):
    judge_kappa_threshold: float | None = Field(
        None,
        strict=True,
        description="Cohen's kappa a judge needs against people (0 to 1)",
    )
    judge_min_items: int | None = Field(
        None,
        strict=True,
        description="items both judged before a judge can be calibrated",
    )


class JudgeThresholdsOut(Schema):
    project: int = Field(alias="pk")
    judge_kappa_threshold: float
    judge_min_items: int
