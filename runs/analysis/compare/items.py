"""The paired items of one (candidate, scorer): the comparison page's table
and the CSV download."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from runs.analysis.compare import sql
from runs.analysis.compare.pairing import comparison_pairing, sql_pairing
from runs.analysis.compare.verdict import CACHE_SECONDS, ScorerComparison
from runs.errors import InvalidInput
from runs.models import Item, Result, Run
from runs.records import cache_keys, single_flight

# The per-item table's filters, by the change of the chosen scorer.
CHANGES = ("regressions", "improvements", "both_failed", "output_changed")


def item_count(row: ScorerComparison, change: str | None) -> int | None:
    """How many paired items a filter keeps, when the comparison counted it."""
    if not change:
        return row.paired
    return getattr(row, change) if change in sql.CELLS else None


class ComparisonItems:
    """The paired items of one (candidate, scorer), for a Paginator.

    Counted and sliced in the database; each slice reads the outputs of its
    rows only.
    """

    def __init__(
        self,
        *,
        baseline: Run,
        candidate: Run,
        scorer: str,
        paired_by: str,
        change: str | None = None,
        count: int | None = None,
    ) -> None:
        self.baseline = baseline
        self.candidate = candidate
        self.scorer = scorer
        self.change = change or None
        if self.change and self.change not in (*sql.CELLS, "output_changed"):
            raise InvalidInput(
                f"must be one of {', '.join(CHANGES)}, not {change!r}", field="change"
            )
        self._pairing = sql_pairing(paired_by, baseline, candidate, scorer)
        # Known already when the comparison counted it (paired, or a cell).
        self._count: int | None = count

    def count(self) -> int:
        """How many paired items match; kept under both runs' results_version."""
        if self._count is None:
            key = cache_keys.comparison_items(
                self.baseline, self.candidate, self.scorer, self.change
            )
            self._count = single_flight.cached(
                key,
                lambda: sql.item_count(self._pairing, self.change),
                CACHE_SECONDS,
            )
        return self._count

    def __len__(self) -> int:
        return self.count()

    def __getitem__(self, index: slice) -> list[dict[str, Any]]:
        if not isinstance(index, slice):
            raise TypeError("ComparisonItems supports slices only")
        start = index.start or 0
        stop = self.count() if index.stop is None else index.stop
        return list(self.rows(limit=max(stop - start, 0), offset=start))

    def rows(
        self, *, limit: int | None = None, offset: int = 0, chunk: int = 500
    ) -> Iterator[dict[str, Any]]:
        """The matching items in dataset order, fetched ``chunk`` at a time."""
        for batch in sql.item_rows(
            self._pairing, self.change, limit=limit, offset=offset, chunk=chunk
        ):
            yield from self._with_outputs(batch)

    def _with_outputs(self, batch: list[tuple[Any, ...]]) -> Iterator[dict[str, Any]]:
        ids = [row[3] for row in batch] + [row[4] for row in batch]
        outputs = dict(Result.objects.filter(pk__in=ids).values_list("pk", "output"))
        # The baseline's item: its question and expected answer beside both outputs.
        items = {
            pk: (external_id, question, expected)
            for pk, external_id, question, expected in Item.objects.filter(
                pk__in=[row[1] for row in batch]
            ).values_list("pk", "external_id", "input", "expected")
        }
        for row in batch:
            _key, b_item, c_item, b_result, c_result, index = row[:6]
            external_id, question, expected = items.get(b_item, (None, None, None))
            b_n, b_passes, b_total, c_n, c_passes, c_total, change = row[6:13]
            b_stopped, c_stopped = row[13:]
            yield {
                "external_id": external_id,
                "index": index,
                "input": question,
                "expected": expected,
                "baseline_run": self.baseline.pk,
                "candidate_run": self.candidate.pk,
                "scorer": self.scorer,
                "baseline_item": b_item,
                "candidate_item": c_item,
                "baseline_result": b_result,
                "candidate_result": c_result,
                "baseline_output": outputs.get(b_result),
                "candidate_output": outputs.get(c_result),
                "baseline_epochs": int(b_n),
                "candidate_epochs": int(c_n),
                "baseline_pass_rate": int(b_passes) / int(b_n),
                "candidate_pass_rate": int(c_passes) / int(c_n),
                "baseline_score": float(b_total) / int(b_n),
                "candidate_score": float(c_total) / int(c_n),
                "change": change,
                "baseline_stopped": int(b_stopped),
                "candidate_stopped": int(c_stopped),
            }


def comparison_item_rows(
    *,
    baseline: Run,
    candidate: Run,
    scorer: str,
    change: str | None = None,
) -> Iterator[dict[str, Any]]:
    """Every paired item of (candidate, scorer), in dataset order, as dicts.

    Keys: external_id, index, input, expected (the baseline's item's),
    baseline_run, candidate_run, scorer,
    baseline_item, candidate_item, baseline_result, candidate_result (the first
    result of each run for the item), baseline_output, candidate_output,
    baseline_epochs, candidate_epochs (epochs whose score of this scorer was
    not skipped), baseline_pass_rate, candidate_pass_rate
    (pass fraction over those epochs), baseline_score, candidate_score (mean value
    over epochs, failures as 0), change (both_passed, regressions,
    improvements or both_failed), baseline_stopped, candidate_stopped (epochs
    stopped in flight: no sample, left out of the figures before). ``change``
    filters as on the page. The
    per-item figures come from one query (small tuples); outputs, the large
    part, are read 500 rows at a time.
    """
    paired_by = comparison_pairing(baseline=baseline, candidates=[candidate])
    items = ComparisonItems(
        baseline=baseline,
        candidate=candidate,
        scorer=scorer,
        paired_by=paired_by,
        change=change,
    )
    return items.rows()
