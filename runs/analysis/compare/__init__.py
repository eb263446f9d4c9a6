"""Is run B really better than run A: paired tables, exact tests, Holm.

- ``pairing``: how two runs' items pair (by item, or by external id across
  versions of one dataset) and each scorer's paired table and per-item
  differences;
- ``sql``: the statements behind them, the only hand SQL of the comparison;
- ``significance``: McNemar and its inverted interval, the sign-flip test
  (``signflip``), Holm and the rows' Holm levels, the minimum detectable
  effects (and Newcombe's interval and the paired bootstrap, no longer the
  comparison's);
- ``verdict``: every (candidate, scorer) row and its verdict, cached;
- ``items``: the paired items of one (candidate, scorer), for the page and
  the CSV.

The four cells count an item as passed when it passed in at least half its
epochs; with one epoch, when it passed. The other definitions are stated in
the modules that apply them (also on the comparison page).
"""

from __future__ import annotations

from runs.analysis.compare.items import (
    CHANGES,
    ComparisonItems,
    comparison_item_rows,
    item_count,
)
from runs.analysis.compare.pairing import (
    PAIRED_BY_EXTERNAL_ID,
    PAIRED_BY_ITEM,
    PairedTable,
    ScannedScorer,
    comparison_pairing,
    paired_differences,
    paired_table,
    shared_scorers,
    single_scan,
)
from runs.analysis.compare.signflip import (
    EXACT_SIGN_VECTORS,
    NORMAL_EFFECTIVE_ITEMS,
    RESAMPLES,
    SignFlip,
    effective_items,
    sign_flip_test,
)
from runs.analysis.compare.significance import (
    ALPHA,
    BOOTSTRAP_RESAMPLES,
    BOOTSTRAP_SEED,
    CONFIDENCE,
    POWER,
    Bootstrap,
    bootstrap_mde,
    holm_adjust,
    holm_level,
    mcnemar_exact,
    mcnemar_interval,
    mcnemar_mde,
    mcnemar_power,
    newcombe_paired_interval,
    paired_bootstrap,
    sign_flip_mde,
)
from runs.analysis.compare.verdict import (
    BETTER,
    INTERVAL_BOOTSTRAP,
    INTERVAL_MCNEMAR,
    INTERVAL_NEWCOMBE,
    INTERVAL_SIGN_FLIP,
    INTERVAL_SIGN_FLIP_NORMAL,
    NO_DIFFERENCE,
    SIGN_FLIP_TESTS,
    TEST_BOOTSTRAP,
    TEST_MCNEMAR,
    TEST_SIGN_FLIP_DRAWN,
    TEST_SIGN_FLIP_EXACT,
    TEST_SIGN_FLIP_NORMAL,
    WORSE,
    Comparison,
    ScorerComparison,
    compare_runs,
    compare_runs_cached,
)

__all__ = [
    "ALPHA",
    "BETTER",
    "BOOTSTRAP_RESAMPLES",
    "BOOTSTRAP_SEED",
    "CHANGES",
    "CONFIDENCE",
    "EXACT_SIGN_VECTORS",
    "INTERVAL_BOOTSTRAP",
    "INTERVAL_MCNEMAR",
    "INTERVAL_NEWCOMBE",
    "INTERVAL_SIGN_FLIP",
    "INTERVAL_SIGN_FLIP_NORMAL",
    "NORMAL_EFFECTIVE_ITEMS",
    "NO_DIFFERENCE",
    "PAIRED_BY_EXTERNAL_ID",
    "PAIRED_BY_ITEM",
    "POWER",
    "RESAMPLES",
    "SIGN_FLIP_TESTS",
    "TEST_BOOTSTRAP",
    "TEST_MCNEMAR",
    "TEST_SIGN_FLIP_DRAWN",
    "TEST_SIGN_FLIP_EXACT",
    "TEST_SIGN_FLIP_NORMAL",
    "WORSE",
    "Bootstrap",
    "Comparison",
    "ComparisonItems",
    "PairedTable",
    "ScannedScorer",
    "ScorerComparison",
    "SignFlip",
    "bootstrap_mde",
    "compare_runs",
    "compare_runs_cached",
    "comparison_item_rows",
    "comparison_pairing",
    "effective_items",
    "holm_adjust",
    "holm_level",
    "item_count",
    "mcnemar_exact",
    "mcnemar_interval",
    "mcnemar_mde",
    "mcnemar_power",
    "newcombe_paired_interval",
    "paired_bootstrap",
    "paired_differences",
    "paired_table",
    "shared_scorers",
    "sign_flip_mde",
    "sign_flip_test",
    "single_scan",
]
