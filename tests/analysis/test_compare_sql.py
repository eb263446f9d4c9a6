"""The comparison's hand SQL (``compare.sql``) agrees with its figures
computed in Python from the rows as the ORM reads them, every column of
``Result`` and ``Score`` taken from their ``_meta``."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pytest
from django.db import connection

from runs.analysis import compare
from runs.analysis.compare import sql
from runs.models import Item, Project, Result, Run, Score
from tests.comparisons import add_result, finish, make_run
from tests.factories import arithmetic_items, make_dataset

pytestmark = pytest.mark.django_db

# Per item and epoch, each run's outcome of "judge" (a value, "error",
# "skipped", "failed": no score) and of "exact_match".
OUTCOMES: list[Any] = [1.0, 0.0, 0.25, "error", "skipped", "failed", 0.75, 1.0]


def _rows(model: type[Result] | type[Score], **filters: Any) -> list[dict[str, Any]]:
    """Every column of ``model``'s rows, named by ``_meta``."""
    names = [f.attname for f in model._meta.concrete_fields]
    return [
        dict(zip(names, row, strict=True))
        for row in model.objects.filter(**filters).values_list(*names)
    ]


def _per_item(baseline: Run, candidate: Run, scorer: str) -> dict[int, dict]:
    """Per item and run: epochs kept, skipped, passed, and the sum of values."""
    runs = [baseline.pk, candidate.pk]
    scores = {
        row["result_id"]: row
        for row in _rows(Score, result__run__in=runs, scorer=scorer)
    }
    items: dict[int, dict] = defaultdict(
        lambda: {run: [0, 0, 0, 0.0, 0] for run in runs}
    )
    for result in _rows(Result, run__in=runs):
        score = scores.get(result["id"])
        figures = items[result["item_id"]][result["run_id"]]
        skipped = bool(score and score["skipped"])
        figures[0] += not skipped
        figures[1] += skipped
        figures[2] += bool(score and score["passed"])
        value = score["value"] if score else None
        figures[3] += value or 0
        figures[4] += value is not None and value not in (0, 1)
    return items


def _table(baseline: Run, candidate: Run, scorer: str) -> compare.PairedTable:
    """The paired table, from the rows in Python."""
    cells = dict.fromkeys(("both", "regressions", "improvements", "failed"), 0)
    sums, paired, split, graded, skipped = [0.0] * 4, 0, 0, 0, 0
    items = _per_item(baseline, candidate, scorer)
    for figures in items.values():
        (bn, bs, bp, bt, bg), (cn, cs, cp, ct, cg) = (
            figures[baseline.pk],
            figures[candidate.pk],
        )
        if bn + bs and cn + cs and not (bn and cn):
            skipped += 1
        if not (bn and cn):
            continue
        paired += 1
        b_passed, c_passed = 2 * bp >= bn, 2 * cp >= cn
        key = {
            (True, True): "both",
            (True, False): "regressions",
            (False, True): "improvements",
            (False, False): "failed",
        }[(b_passed, c_passed)]
        cells[key] += 1
        for n, (value, count) in enumerate(((bp, bn), (cp, cn), (bt, bn), (ct, cn))):
            sums[n] += value / count
        split += not (bp in (0, bn) and cp in (0, cn))
        graded += bg + cg
    return compare.PairedTable(
        paired,
        *cells.values(),
        *sums,
        split_items=split,
        graded_scores=graded,
        baseline_items=sum(
            f[baseline.pk][0] + f[baseline.pk][1] > 0 for f in items.values()
        ),
        candidate_items=sum(
            f[candidate.pk][0] + f[candidate.pk][1] > 0 for f in items.values()
        ),
        skipped=skipped,
    )


def _runs(project: Project, epochs: int) -> tuple[Run, Run]:
    dataset = make_dataset(project, arithmetic_items(12), name=f"mixed{epochs}")
    items = list(Item.objects.filter(dataset=dataset).order_by("index"))
    baseline = make_run(dataset, scorers=["exact_match", "judge"], epochs=epochs)
    candidate = make_run(dataset, scorers=["exact_match", "judge"], epochs=epochs)
    for n, item in enumerate(items):
        for epoch in range(epochs):
            for k, run in enumerate((baseline, candidate)):
                if n == 11 and k == 1:
                    continue  # an item the candidate has no result for
                judge = OUTCOMES[(n + 3 * k + epoch) % len(OUTCOMES)]
                exact = 1.0 if (n + k + epoch) % 3 else 0.0
                outcomes = {"exact_match": exact, "judge": judge}
                if judge == "failed":
                    outcomes = {"judge": "failed"}
                add_result(run, item, outcomes, epoch=epoch, output=f"{n}-{k}")
    return finish(baseline), finish(candidate)


def test_the_sql_names_only_columns_of_the_models():
    quote = connection.ops.quote_name
    columns = {
        quote(name)
        for model in (Result, Score, Item)
        for name in [model._meta.db_table]
        + [f.column for f in model._meta.concrete_fields]
    }
    used = sql.names()
    assert {getattr(used, name) for name in used.__slots__} <= columns


@pytest.mark.parametrize("epochs", [1, 2])
@pytest.mark.parametrize("scorer", ["exact_match", "judge"])
def test_paired_tables_and_items_agree_with_the_rows(project, epochs, scorer):
    baseline, candidate = _runs(project, epochs)
    table = compare.paired_table(
        baseline=baseline,
        candidate=candidate,
        scorer=scorer,
        paired_by=compare.PAIRED_BY_ITEM,
    )
    expected = _table(baseline, candidate, scorer)
    for name in expected.__slots__:
        assert getattr(table, name) == pytest.approx(getattr(expected, name)), name
    assert table.paired > 0

    items = _per_item(baseline, candidate, scorer)
    rows = list(
        compare.ComparisonItems(
            baseline=baseline,
            candidate=candidate,
            scorer=scorer,
            paired_by=compare.PAIRED_BY_ITEM,
        ).rows()
    )
    assert len(rows) == table.paired
    for row in rows:
        (bn, _bs, bp, bt, _bg) = items[row["baseline_item"]][baseline.pk]
        (cn, _cs, cp, ct, _cg) = items[row["candidate_item"]][candidate.pk]
        assert (row["baseline_epochs"], row["candidate_epochs"]) == (bn, cn)
        assert row["baseline_pass_rate"] == pytest.approx(bp / bn)
        assert row["candidate_pass_rate"] == pytest.approx(cp / cn)
        assert row["candidate_score"] == pytest.approx(ct / cn)
        assert row["baseline_score"] == pytest.approx(bt / bn)
    assert [row["index"] for row in rows] == sorted(row["index"] for row in rows)
    changes = [row["change"] for row in rows]
    for change in ("both_passed", "regressions", "improvements", "both_failed"):
        assert changes.count(change) == getattr(table, change)
        kept = compare.ComparisonItems(
            baseline=baseline,
            candidate=candidate,
            scorer=scorer,
            paired_by=compare.PAIRED_BY_ITEM,
            change=change,
        )
        assert kept.count() == getattr(table, change)
