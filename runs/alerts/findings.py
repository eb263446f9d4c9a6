"""What in a finished run is worth telling its channels.

A finding is one of: a scorer whose comparison with the baseline says
"worse" (the comparison's own verdict: Holm-adjusted, at alpha 0.05; a tie
or a difference the test cannot tell from chance is no finding), a scorer's
pass rate below the floor set for it, or the run failed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from runs.analysis.compare import WORSE, compare_runs
from runs.analysis.summary import run_pass_rates
from runs.errors import InvalidInput
from runs.models import Run, RunStatus

WORSE_THAN_BASELINE = "worse_than_baseline"
BELOW_FLOOR = "below_floor"
RUN_FAILED = "run_failed"


@dataclass(frozen=True, slots=True)
class Finding:
    kind: str  # WORSE_THAN_BASELINE, BELOW_FLOOR or RUN_FAILED
    message: str
    scorer: str | None = None
    pass_rate: float | None = None  # the run's (mean, for a numeric scorer)
    baseline_pass_rate: float | None = None
    delta: float | None = None
    delta_ci: tuple[float, float] | None = None
    p_value: float | None = None
    p_value_adjusted: float | None = None
    verdict: str | None = None
    floor: float | None = None
    measure: str | None = None  # "pass_rate" or "mean"

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["delta_ci"] = list(self.delta_ci) if self.delta_ci else None
        return data


def _percent(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def clean_floors(floors: Any, *, field: str = "floors") -> dict[str, float]:
    """Floors as {scorer: pass rate in [0, 1]}; InvalidInput naming the bad one."""
    if floors in (None, ""):
        return {}
    if not isinstance(floors, Mapping):
        raise InvalidInput(
            'must be an object such as {"exact_match": 0.8}', field=field
        )
    cleaned: dict[str, float] = {}
    for scorer, floor in floors.items():
        if isinstance(floor, bool) or not isinstance(floor, int | float):
            raise InvalidInput(
                "must be a number from 0 to 1", field=f"{field}.{scorer}"
            )
        if not 0.0 <= float(floor) <= 1.0:
            raise InvalidInput("must be from 0 to 1", field=f"{field}.{scorer}")
        cleaned[str(scorer)] = float(floor)
    return cleaned


def _worse(run: Run, baseline: Run) -> list[Finding]:
    comparison = compare_runs(baseline=baseline, candidates=[run])
    found = []
    for row in comparison.scorers:
        if row.verdict != WORSE:
            continue
        numeric = row.measure == "mean"
        now = row.candidate_mean if numeric else row.candidate_pass_rate
        before = row.baseline_mean if numeric else row.baseline_pass_rate
        shown = (lambda v: f"{v:.3f}") if numeric else _percent
        found.append(
            Finding(
                kind=WORSE_THAN_BASELINE,
                message=(
                    f"{row.scorer}: {shown(now)} against {shown(before)} in the "
                    f"baseline (p = {row.p_value_adjusted:.3g}, Holm-adjusted)"
                ),
                scorer=row.scorer,
                pass_rate=now,
                baseline_pass_rate=before,
                delta=row.delta,
                delta_ci=row.delta_ci,
                p_value=row.p_value,
                p_value_adjusted=row.p_value_adjusted,
                verdict=row.verdict,
                measure=row.measure,
            )
        )
    return found


def _below_floors(run: Run, floors: Mapping[str, float]) -> list[Finding]:
    rates = run_pass_rates(run)
    found = []
    for scorer, floor in floors.items():
        rate = rates.get(scorer)
        if rate is None or rate >= floor:
            continue  # no pass rate (no result scored): the run's status tells
        found.append(
            Finding(
                kind=BELOW_FLOOR,
                message=f"{scorer}: pass rate {_percent(rate)} is below its "
                f"floor of {_percent(floor)}",
                scorer=scorer,
                pass_rate=rate,
                floor=floor,
                measure="pass_rate",
            )
        )
    return found


def findings(
    run: Run, baseline: Run | None, floors: Mapping[str, float] | None = None
) -> list[Finding]:
    """What to tell of ``run``: failed, worse than ``baseline``, below floors."""
    if baseline is not None and baseline.project_id != run.project_id:
        raise InvalidInput("belongs to another project than the run", field="baseline")
    floors = clean_floors(floors)
    found: list[Finding] = []
    if run.status == RunStatus.FAILED:
        found.append(
            Finding(
                kind=RUN_FAILED,
                message=f"the run failed: {run.error}"
                if run.error
                else "the run failed",
            )
        )
    if baseline is not None and baseline.pk != run.pk:
        found.extend(_worse(run, baseline))
    found.extend(_below_floors(run, floors))
    return found
