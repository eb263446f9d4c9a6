"""How many paired items a comparison needs: the exact power of McNemar's test.

A pass/fail scorer's paired items are discordant with probability ``psi``
(the discordance): a regression with probability (psi - delta) / 2, an
improvement with (psi + delta) / 2, ``delta`` the difference of pass rates
to detect. Given k discordant items the improvements are Binomial(k,
(psi + delta) / (2 psi)); the exact test rejects when its two-sided p-value,
min(1, 2 min(F(x), 1 - F(x - 1))) under Binomial(k, 1/2), is below the level.
The power at n items is the sum over k of P(K = k) P(reject | k), K ~
Binomial(n, psi): an exact enumeration of k (over the counts holding all but
1e-12 of K's probability).

Holm over m comparisons: a row's adjusted p-value is at least m times its
own, so planning at the level alpha / m (Holm's strictest step) gives the
power whatever the other rows show.

The exact power saw-tooths with n (the critical counts move in steps), so
"items needed" is where bisection finds it crossing the target: power(n) >=
target > power(n - 1).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np

from runs.errors import InvalidInput

POWER = 0.80
ALPHA = 0.05
MAX_ITEMS = 10_000_000
METHOD = "mcnemar_exact_enumeration"
TAIL = 1e-12


@dataclass(frozen=True, slots=True)
class PlanInput:
    pass_rate: float  # the baseline's
    delta: float  # candidate - baseline, the difference to detect
    discordance: float | None  # None: as if the runs' verdicts were independent
    comparisons: int = 1  # m, Holm's family
    power: float = POWER
    alpha: float = ALPHA


@dataclass(frozen=True, slots=True)
class Plan:
    pass_rate: float
    delta: float
    discordance: float
    comparisons: int
    power: float
    alpha: float
    level: float  # alpha / comparisons
    items: int | None  # None: more than MAX_ITEMS
    achieved_power: float | None
    method: str = METHOD


def mcnemar_power(
    *, items: int, discordance: float, delta: float, level: float
) -> float:
    """Exact power of the two-sided McNemar test at ``level`` with ``items`` pairs."""
    from scipy import stats

    if items <= 0 or discordance <= 0:
        return 0.0
    low = int(stats.binom.ppf(TAIL, items, discordance))
    high = int(stats.binom.isf(TAIL, items, discordance))
    k = np.arange(max(low, 1), high + 1)
    if len(k) == 0:
        return 0.0
    # The largest count x with 2 F(x) < level under Binomial(k, 1/2): the
    # lower critical count (-1 when none), the upper one k - x by symmetry.
    first = np.asarray(stats.binom.ppf(level / 2, k, 0.5)).astype(np.int64)
    critical = first - 1
    critical = np.where(2 * stats.binom.cdf(first, k, 0.5) < level, first, critical)
    q = (discordance + delta) / (2 * discordance)
    reject = np.where(
        critical >= 0,
        stats.binom.cdf(critical, k, q) + stats.binom.sf(k - critical - 1, k, q),
        0.0,
    )
    return float(np.dot(stats.binom.pmf(k, items, discordance), reject))


def _discordance(given: PlanInput) -> float:
    """The discordance to plan with, checked against the pass rates."""
    p_base, delta = given.pass_rate, given.delta
    p_cand = p_base + delta
    if not 0 <= p_cand <= 1:
        raise InvalidInput(
            f"pass_rate + delta must lie in [0, 1], not {p_cand:.4g}", field="delta"
        )
    psi = given.discordance
    if psi is None:  # independent verdicts
        psi = p_base * (1 - p_cand) + p_cand * (1 - p_base)
    regressions, improvements = (psi - delta) / 2, (psi + delta) / 2
    if regressions < -1e-12 or psi <= 0:
        raise InvalidInput(
            f"a difference of {delta:.4g} needs a discordance of at least "
            f"{abs(delta):.4g} (items that differ between the runs), not {psi:.4g}",
            field="discordance",
        )
    if regressions > p_base + 1e-12 or improvements > 1 - p_base + 1e-12:
        raise InvalidInput(
            f"a discordance of {psi:.4g} with a difference of {delta:.4g} cannot "
            f"arise from a pass rate of {p_base:.4g}",
            field="discordance",
        )
    return float(psi)


def plan_compute(given: PlanInput) -> Plan:
    """Items needed to detect ``delta`` at ``power`` after Holm over m rows."""
    if given.delta == 0:
        raise InvalidInput("a difference to detect cannot be 0", field="delta")
    psi = _discordance(given)
    level = given.alpha / given.comparisons
    delta = abs(given.delta)  # the test is two-sided and symmetric

    def power(n: int) -> float:
        return mcnemar_power(items=n, discordance=psi, delta=delta, level=level)

    items = _crossing(power, given.power)
    figures = {"discordance": psi, "level": level, "items": items}
    achieved = power(items) if items is not None else None
    return Plan(**(asdict(given) | figures), achieved_power=achieved)


def _crossing(power: Callable[[int], float], target: float) -> int | None:
    """An n with power(n) >= target > power(n - 1), by doubling then bisection;
    None beyond MAX_ITEMS."""
    low, high = 0, 1
    while power(high) < target:
        low, high = high, high * 2
        if low >= MAX_ITEMS:
            return None
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if power(middle) >= target else (middle, high)
    return high
