"""What a run stores of its results when it ends (its result table and, with
one epoch, its verdicts) holds what the ORM reads of them, cell by cell; and
the results joined with their scores are read once for both."""

from __future__ import annotations

import gc
import io
import json
import re
from typing import Any

import numpy as np
import pytest
from django.db import connection
from django.db.models import F
from django.test.utils import CaptureQueriesContext

from runs.analysis import result_table, verdicts
from runs.analysis.charts import run_charts
from runs.analysis.figures import run_figures_store
from runs.analysis.stored_arrays import npz_bytes
from runs.analysis.summary import run_summary
from runs.models import (
    DEADLINE_ERROR_TYPE,
    Result,
    ResultStatus,
    Run,
    RunFigures,
    RunResultTable,
    RunVerdicts,
    Score,
)
from tests.factories import arithmetic_items, make_dataset
from tests.varied_runs import varied_run

pytestmark = pytest.mark.django_db

# A third scorer, of fractional values, added to the run's two.
JUDGE = "judge"


@pytest.fixture
def dataset(project):
    return make_dataset(project, arithmetic_items(130), name="varied")


def _stopped(result: Result) -> bool:
    return result.status == ResultStatus.CANCELLED or (
        result.status == ResultStatus.TIMED_OUT
        and result.error_type == DEADLINE_ERROR_TYPE
    )


def _more_varied(run: Run, *, foreign: bool = True) -> Run:
    """``run`` with what its results go through after they are stored:
    results stopped in flight (a cancel, the deadline), retried (rewritten
    to succeed), re-scored values, a third scorer of fractional values and
    a score of a scorer the run does not name; dataset order unlike item
    order. ``foreign``: with the scores of a scorer the run does not name."""
    results = Result.objects.filter(run=run)
    results.filter(item_index__in=[0, 14, 40]).update(
        status=ResultStatus.CANCELLED, error_type="Cancelled"
    )
    results.filter(item_index__in=[18, 29]).update(
        status=ResultStatus.TIMED_OUT, error_type=DEADLINE_ERROR_TYPE
    )
    retried = results.filter(item_index__in=[3, 7], epoch=0)
    retried.update(
        status=ResultStatus.SUCCEEDED,
        error_kind="",
        error_type="",
        error_message="",
        error_signature="",
        attempts=[{"number": 1, "outcome": "error"}, {"number": 2, "outcome": "ok"}],
    )
    Score.objects.bulk_create(
        Score(result=r, scorer="exact_match", value=1.0, passed=True) for r in retried
    )
    rescored = Score.objects.filter(result__run=run, scorer="exact_match")
    rescored.filter(result__item_index__in=[1, 2, 5, 6]).update(
        value=0.25, passed=False, error="", reason="partly", reason_signature="partly"
    )
    Score.objects.bulk_create(
        Score(
            result=r,
            scorer=JUDGE,
            value=None if r.item_index % 9 == 4 else round(r.item_index / 131, 3),
            passed=None if r.item_index % 9 == 4 else r.item_index % 2 == 0,
            error="judge call failed" if r.item_index % 9 == 4 else "",
            reason="" if r.item_index % 2 == 0 else "unsure",
            reason_signature="" if r.item_index % 2 == 0 else "unsure",
        )
        for r in results.filter(status=ResultStatus.SUCCEEDED)
        if r.item_index % 5 != 2
    )
    if foreign:
        Score.objects.bulk_create(
            Score(result=r, scorer="gone", value=1.0, passed=True)
            for r in results.filter(item_index__lt=20)
        )
    # Dataset order backwards: the table reads in it, the verdicts by item.
    results.update(item_index=1000 - F("item_index"))
    Run.objects.filter(pk=run.pk).update(
        scorers=[*run.scorers, {"kind": "exact_match", "name": JUDGE}]
    )
    run.refresh_from_db()
    return run


def _marks(score: Score | None) -> int:
    if score is None:
        return 0
    marks = result_table.SCORED
    marks |= result_table.PASSED if score.passed else 0
    marks |= result_table.FAILED if score.passed is False and not score.error else 0
    marks |= result_table.ERRORED if score.error else 0
    marks |= result_table.SKIPPED if score.skipped else 0
    return marks


def _read(run: Run) -> list[tuple[Result, dict[str, Score]]]:
    """The run's results in dataset order, each with its scores by scorer."""
    found = Result.objects.filter(run=run).order_by("item_index", "epoch")
    return [
        (r, {s.scorer: s for s in r.scores.all()})
        for r in found.prefetch_related("scores")
    ]


def _table_as_stored(run: Run) -> list[tuple[Any, ...]]:
    table = result_table.run_result_table(run=run)
    assert table is not None

    def words(name: str, codes: np.ndarray) -> list[str]:
        return [table.vocabulary(name)[int(code)] for code in codes]

    reasons = table.array("reason")
    return list(
        zip(
            table.ids.tolist(),
            table.items.tolist(),
            table.indexes.tolist(),
            table.array("epochs").tolist(),
            words("status", table.array("status")),
            words("kind", table.array("kind")),
            words("error", table.array("error")),
            [tuple(row) for row in table.array("marks").tolist()],
            [
                tuple(
                    words("reason", reasons[:, j])[i] for j in range(reasons.shape[1])
                )
                for i in range(len(table))
            ],
            strict=True,
        )
    )


def _table_from_orm(run: Run) -> list[tuple[Any, ...]]:
    names = run.scorer_names
    return [
        (
            r.pk,
            r.item_id,
            r.item_index,
            r.epoch,
            r.status,
            r.error_kind,
            r.error_signature,
            tuple(_marks(scores.get(name)) for name in names),
            tuple(
                scores[name].reason_signature if name in scores else ""
                for name in names
            ),
        )
        for r, scores in _read(run)
    ]


def _verdict(result: Result, score: Score | None) -> tuple[int, float]:
    state = 0
    if _stopped(result):
        state = verdicts.STOPPED
    elif score is not None and score.skipped:
        state = verdicts.SKIPPED
    if score is not None and score.passed:
        state += verdicts.PASSED
    value = score.value if score is not None and score.value is not None else 0.0
    return state, value


def _check_verdicts(run: Run) -> None:
    # Stored when the run ended, current: read back, not computed.
    assert RunVerdicts.objects.get(run=run).version.endswith(run.results_version)
    stored = verdicts.run_verdicts(run=run)
    assert stored is not None
    rows = sorted(_read(run), key=lambda row: row[0].item_id)
    names = run.scorer_names
    assert stored.scorers == tuple(names)
    assert stored.items.tolist() == [r.item_id for r, _ in rows]
    expected = [[_verdict(r, scores.get(name)) for name in names] for r, scores in rows]
    assert stored.states.tolist() == [[s for s, _ in row] for row in expected]
    assert stored.values.tolist() == [[v for _, v in row] for row in expected]
    assert stored.states.dtype == np.uint8 and stored.values.dtype == np.float64
    assert stored.items.dtype == np.int64


@pytest.mark.parametrize("joined", [verdicts.JOINED_SCORERS, 2])
def test_what_a_run_stores_when_it_ends_is_what_the_orm_reads(
    dataset, monkeypatch, joined
):
    # With 2, the scores of the third scorer are joined by a second query.
    monkeypatch.setattr(result_table, "JOINED_SCORERS", joined)
    monkeypatch.setattr(verdicts, "JOINED_SCORERS", joined)
    run = _more_varied(varied_run(dataset))

    run_figures_store(run.pk)

    assert _table_as_stored(run) == _table_from_orm(run)
    _check_verdicts(run)
    states = verdicts.run_verdicts(run=run).states  # every state is met
    assert {0, verdicts.PASSED, verdicts.SKIPPED, verdicts.STOPPED} <= set(
        states.ravel().tolist()
    )


def test_the_table_of_a_run_of_epochs_is_what_the_orm_reads(dataset):
    run = _more_varied(varied_run(dataset, epochs=2))

    run_figures_store(run.pk)

    assert _table_as_stored(run) == _table_from_orm(run)
    assert not RunVerdicts.objects.filter(run=run).exists()


def test_verdicts_or_a_table_stored_already_are_kept_and_the_other_computed(
    dataset,
):
    run = _more_varied(varied_run(dataset))
    run_figures_store(run.pk)
    for model in (RunVerdicts, RunResultTable):
        computed = model.objects.get(run=run).computed_at
        model.objects.filter(run=run).delete()
        gc.collect()  # the instances that stored them, and their tables, are gone

        run_figures_store(run.pk)

        assert model.objects.get(run=run).computed_at > computed
        assert _table_as_stored(run) == _table_from_orm(run)
        _check_verdicts(run)


def test_the_results_are_joined_with_their_scores_once_when_a_run_ends(dataset):
    run = _more_varied(varied_run(dataset))
    joined = (
        f"FROM {Result._meta.db_table} r LEFT JOIN {Score._meta.db_table} s0"
    ).lower()

    with CaptureQueriesContext(connection) as queries:
        run_figures_store(run.pk)

    reads = [q["sql"] for q in queries.captured_queries if joined in q["sql"].lower()]
    # One read gives both the result table and the verdicts (it read the
    # results and their scores once for each).
    assert len(reads) == 1, reads
    assert RunVerdicts.objects.filter(run=run).exists()
    assert RunResultTable.objects.filter(run=run).exists()


def test_stored_arrays_read_back_as_numpy_writes_them():
    arrays = {
        "ids": np.array([3, 1, 2], dtype=np.int64),
        "marks": np.array([[1, 2], [4, 8]], dtype=np.uint8),
        "values": np.array([0.25, np.nan, -1.0]),
        "words": np.array(["", "timed out", "é"], dtype=str),
        "none": np.zeros(0, dtype=np.int8),
    }
    with np.load(io.BytesIO(npz_bytes(arrays)), allow_pickle=False) as read:
        assert sorted(read.files) == sorted(arrays)
        for name, array in arrays.items():
            assert read[name].dtype == array.dtype
            np.testing.assert_array_equal(read[name], array)


@pytest.mark.parametrize("epochs", [1, 2])
def test_the_charts_stored_at_a_runs_end_are_those_the_database_bins(dataset, epochs):
    run = _more_varied(varied_run(dataset, epochs=epochs), foreign=False)
    value = f'"{Score._meta.db_table}"."value"'

    with CaptureQueriesContext(connection) as queries:
        run_figures_store(run.pk)

    summary = run_summary(run=run)
    in_sql = json.loads(json.dumps(run_charts(run=run, summary=summary)))
    stored = RunFigures.objects.get(run=run).data["charts"]
    assert stored == in_sql
    assert {c["scorer"] for c in stored["scores"]} == set(run.scorer_names)
    assert any("bins" in c for c in stored["scores"])  # a histogram, not values
    # The scores' values came with the result table: not binned in the database.
    binned = [q["sql"] for q in queries.captured_queries if "FLOOR" in q["sql"]]
    assert binned and not [sql for sql in binned if value in sql]


@pytest.mark.parametrize("epochs", [1, 2])
def test_the_timings_stored_at_a_runs_end_are_numpys_of_the_rows(dataset, epochs):
    run = _more_varied(varied_run(dataset, epochs=epochs), foreign=False)
    results = Result.objects.filter(run=run)
    # Latencies in no order of the rows, ties among them; some results have
    # none, and a failed result's latency is not a succeeded one's.
    results.update(
        latency_ms=(F("item_index") * 37 + F("epoch") * 11) % 53 * 2.5,
        time_to_result_ms=(F("item_index") * 17 + F("epoch")) % 29 * 10.0 + 0.5,
    )
    succeeded = results.filter(status=ResultStatus.SUCCEEDED)
    # _more_varied numbered the rows 1000 - index: pick succeeded rows by id.
    # One without either, one with a latency but no time to result, one the
    # reverse.
    first = list(succeeded.order_by("pk").values_list("pk", flat=True)[:3])
    results.filter(pk__in=first[:2]).update(latency_ms=None)
    results.filter(pk__in=[first[0], first[2]]).update(time_to_result_ms=None)
    latencies = list(
        succeeded.filter(latency_ms__isnull=False).values_list("latency_ms", flat=True)
    )
    times = list(
        succeeded.filter(time_to_result_ms__isnull=False).values_list(
            "time_to_result_ms", flat=True
        )
    )
    assert results.exclude(status=ResultStatus.SUCCEEDED).exists()
    # The NULLs bite: each column misses some succeeded rows, not the same.
    assert len(latencies) == len(times) == succeeded.count() - 2

    with CaptureQueriesContext(connection) as queries:
        run_figures_store(run.pk)

    summary = RunFigures.objects.get(run=run).data["summary"]
    assert summary["latency_count"] == len(latencies)
    assert summary["time_to_result_count"] == len(times)
    for name, q in (("p50", 50), ("p90", 90), ("p99", 99), ("min", 0), ("max", 100)):
        assert summary["latency_ms"][name] == pytest.approx(np.percentile(latencies, q))
    for name, q in (("p50", 50), ("p90", 90), ("p99", 99)):
        assert summary["time_to_result_ms"][name] == pytest.approx(
            np.percentile(times, q)
        )
    # Read with the results and their scores: no statement of its own orders,
    # numbers or bins them.
    column = re.compile(r"\b(latency_ms|time_to_result_ms)\b", re.IGNORECASE)
    joined = f"LEFT JOIN {Score._meta.db_table}".lower()
    own = [
        q["sql"]
        for q in queries.captured_queries
        if q["sql"].lstrip().upper().startswith("SELECT")
        and column.search(q["sql"])
        and joined not in q["sql"].lower()
    ]
    assert own == []
    # The histogram binned from them is the database's.
    stored = RunFigures.objects.get(run=run).data["charts"]["latency"]
    in_sql = run_charts(run=run, summary=run_summary(run=run))["latency"]
    assert stored == json.loads(json.dumps(in_sql))
    assert sum(stored["counts"]) == len(latencies)
    # A going run's summary (read_timings) gives the same figures, exactly.
    going = run_summary(run=run)
    for name in ("latency_ms", "latency_count", "time_to_result_ms"):
        assert summary[name] == getattr(going, name), name
    assert summary["time_to_result_count"] == going.time_to_result_count
