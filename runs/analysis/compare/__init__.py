"""Is run B really better than run A: paired tables, exact tests, Holm.

- ``pairing``: how two runs' items pair (by item, or by external id across
  versions of one dataset) and each scorer's paired table and per-item
  differences;
- ``sql``: the statements behind them, the only hand SQL of the comparison;
- ``significance``: McNemar, Newcombe, the paired bootstrap, Holm, the
  minimum detectable effects;
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
from runs.analysis.compare.significance import (
    ALPHA,
    BOOTSTRAP_RESAMPLES,
    BOOTSTRAP_SEED,
    CONFIDENCE,
    POWER,
    Bootstrap,
    bootstrap_mde,
    holm_adjust,
    mcnemar_exact,
    mcnemar_mde,
    newcombe_paired_interval,
    paired_bootstrap,
)
from runs.analysis.compare.verdict import (
    BETTER,
    INTERVAL_BOOTSTRAP,
    INTERVAL_NEWCOMBE,
    NO_DIFFERENCE,
    TEST_BOOTSTRAP,
    TEST_MCNEMAR,
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
    "INTERVAL_BOOTSTRAP",
    "INTERVAL_NEWCOMBE",
    "NO_DIFFERENCE",
    "PAIRED_BY_EXTERNAL_ID",
    "PAIRED_BY_ITEM",
    "POWER",
    "TEST_BOOTSTRAP",
    "TEST_MCNEMAR",
    "WORSE",
    "Bootstrap",
    "Comparison",
    "ComparisonItems",
    "PairedTable",
    "ScannedScorer",
    "ScorerComparison",
    "bootstrap_mde",
    "compare_runs",
    "compare_runs_cached",
    "comparison_item_rows",
    "comparison_pairing",
    "holm_adjust",
    "item_count",
    "mcnemar_exact",
    "mcnemar_mde",
    "newcombe_paired_interval",
    "paired_bootstrap",
    "paired_differences",
    "paired_table",
    "shared_scorers",
    "single_scan",
]
