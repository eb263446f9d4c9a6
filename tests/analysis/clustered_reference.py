"""An independent reference for the pass rate's interval clustered by item:
statsmodels' cluster-robust variance of a mean, scipy's Student quantile and
Wilson's formula written out with numpy."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import statsmodels.api as sm
from scipy.stats import t


def clustered_wilson(
    per_item: Sequence[Sequence[bool]], confidence: float = 0.95
) -> tuple[float, float]:
    """Wilson's interval at the effective size p(1-p)/V, V statsmodels'
    cluster-robust variance (with its G/(G-1) correction, the (N-1)/(N-K)
    one being 1 for a mean) of the pass rate, on G - 1 degrees of freedom."""
    y = np.concatenate([np.asarray(v, dtype=float) for v in per_item])
    groups = np.repeat(np.arange(len(per_item)), [len(v) for v in per_item])
    fit = sm.OLS(y, np.ones_like(y)).fit(
        cov_type="cluster", cov_kwds={"groups": groups, "use_correction": True}
    )
    p, variance = float(fit.params[0]), float(fit.cov_params()[0, 0])
    size = min(p * (1 - p) / variance, len(y)) if variance > 0 else len(per_item) - 1
    q = t.ppf(0.5 + confidence / 2, len(per_item) - 1)
    centre = (p + q**2 / (2 * size)) / (1 + q**2 / size)
    half = q / (1 + q**2 / size) * np.sqrt(p * (1 - p) / size + q**2 / (4 * size**2))
    low = 0.0 if p == 0 else max(centre - half, 0.0)
    high = 1.0 if p == 1 else min(centre + half, 1.0)
    return (float(low), float(high))
