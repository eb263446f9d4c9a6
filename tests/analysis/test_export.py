"""runs.analysis.export: rows in dataset order with their scores, read a chunk
at a time; CSV cells that no spreadsheet runs as formulas."""

from __future__ import annotations

import csv
import io
import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from runs.analysis.export import (
    export_columns,
    run_export_lines,
    run_export_rows,
    safe_cell,
    stream_csv,
    stream_jsonl,
)
from runs.models import Project, Result, Run, Score
from tests.comparisons import add_result, make_run
from tests.export_runs import exported_run
from tests.factories import arithmetic_items, make_dataset

# -- safe_cell ---------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    ["=cmd|' /C calc'!A0", "+1+1", "-2+3", "@SUM(1)", "\t=1", "\r=1", "=1", "-"],
)
def test_formula_cell_is_prefixed_with_a_quote(text: str) -> None:
    assert safe_cell(text) == "'" + text


@pytest.mark.parametrize("text", ["-3.5", "1e5", "+2", "-0.25e-3", "42", ".5"])
def test_number_text_stays_a_number(text: str) -> None:
    assert safe_cell(text) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [(-3.5, "-3.5"), (100000.0, "100000.0"), (-7, "-7"), (True, "true")],
)
def test_numbers_and_booleans_are_written_as_they_are(value: object, text: str) -> None:
    assert safe_cell(value) == text


def test_plain_text_is_left_alone() -> None:
    assert safe_cell("a = b - c") == "a = b - c"


def test_none_is_an_empty_cell() -> None:
    assert safe_cell(None) == ""


def test_json_value_is_written_as_json() -> None:
    assert json.loads(safe_cell({"q": [1, "x"]})) == {"q": [1, "x"]}


def test_json_string_starting_with_a_formula_is_neutralised() -> None:
    assert safe_cell(["=1"]) == '["=1"]'
    assert safe_cell("=1") == "'=1"


def test_csv_lines_hold_each_cell_as_safe_cell_gives_it() -> None:
    row = [1, -3.5, 1e20, float("nan"), None, 10**20, True, False, "=1", "-2", {"a": 1}]

    (_, line) = stream_csv([str(n) for n in range(len(row))], [row])

    expected = io.StringIO()
    csv.writer(expected).writerow([safe_cell(value) for value in row])
    assert line == expected.getvalue()


# -- stream_csv and stream_jsonl --------------------------------------------------


def test_csv_parses_back_with_the_csv_module() -> None:
    rows = [["a,b", 'say "hi"', "two\nlines"], [1, None, -3.5]]
    text = "".join(stream_csv(["x", "y", "z"], rows))

    parsed = list(csv.reader(io.StringIO(text, newline="")))

    assert parsed == [
        ["x", "y", "z"],
        ["a,b", 'say "hi"', "two\nlines"],
        ["1", "", "-3.5"],
    ]


def test_csv_lines_are_yielded_one_row_at_a_time() -> None:
    lines = list(stream_csv(["x"], [["1"], ["2"]]))

    assert lines == ["x\r\n", "1\r\n", "2\r\n"]


def test_jsonl_has_one_object_per_line() -> None:
    rows = [{"a": "é", "b": None}, {"a": "x\ny", "b": [1]}]

    lines = list(stream_jsonl(rows))

    assert [json.loads(line) for line in lines] == rows
    assert all(line.endswith("\n") and line.count("\n") == 1 for line in lines)


# -- rows of a run -------------------------------------------------------------------


@pytest.fixture
def run(project: Project) -> Run:
    return exported_run(project)


def test_rows_come_in_dataset_order_then_epoch(run: Run) -> None:
    rows = list(run_export_rows(run=run))

    assert [(row["item_index"], row["epoch"]) for row in rows] == [
        (0, 0),
        (0, 1),
        (1, 0),
        (1, 1),
        (2, 0),
        (2, 1),
    ]


def test_rows_have_the_export_columns_in_order(run: Run) -> None:
    rows = list(run_export_rows(run=run))

    assert all(list(row) == export_columns(run=run) for row in rows)
    assert export_columns(run=run)[-10:] == [
        "exact_match.value",
        "exact_match.passed",
        "exact_match.error",
        "exact_match.reason",
        "exact_match.skipped",
        "contains.value",
        "contains.passed",
        "contains.error",
        "contains.reason",
        "contains.skipped",
    ]
    # The CSV header is the same but for .skipped: the passed cell says so.
    assert export_columns(run=run, format="csv")[-8:] == [
        "exact_match.value",
        "exact_match.passed",
        "exact_match.error",
        "exact_match.reason",
        "contains.value",
        "contains.passed",
        "contains.error",
        "contains.reason",
    ]


def test_row_carries_item_fields_and_result_figures(run: Run) -> None:
    row = next(run_export_rows(run=run))

    assert row["external_id"] == "a"
    assert row["input"] == "What is 1 + 2?"
    assert row["expected"] == "3"
    assert row["metadata"] == {"t": 1}
    assert row["status"] == "succeeded"
    assert row["output"] == "3"
    assert row["latency_ms"] == 12.5
    assert (row["prompt_tokens"], row["completion_tokens"]) == (10, 2)
    assert row["cost"] == pytest.approx(0.001)
    assert row["exact_match.value"] == 1.0
    assert row["exact_match.passed"] is True


def test_failed_result_has_its_error_attempts_and_no_scores(run: Run) -> None:
    row = list(run_export_rows(run=run))[2]

    assert row["status"] == "failed"
    assert row["error_kind"] == "permanent"
    assert row["error_type"] == "HTTP 400"
    assert row["error_message"] == "bad request (req_8f3a) at https://api.example/v1"
    assert row["attempts"] == 3
    assert row["exact_match.value"] is None
    assert row["exact_match.passed"] is None
    assert row["contains.error"] is None


def test_scorer_error_is_in_its_own_column(run: Run) -> None:
    row = list(run_export_rows(run=run))[1]

    assert row["contains.error"] == "judge timed out"
    assert row["contains.value"] is None
    assert row["exact_match.passed"] is False
    assert row["exact_match.error"] is None


def test_run_csv_parses_back_with_header_and_neutralised_cells(run: Run) -> None:
    text = "".join(run_export_lines(run=run, format="csv"))

    header, *rows = list(csv.reader(io.StringIO(text, newline="")))

    assert header == export_columns(run=run, format="csv")
    assert len(rows) == 6
    cell = dict(zip(header, rows[1], strict=True))
    assert cell["output"] == "'=cmd|' /C calc'!A0"
    assert dict(zip(header, rows[2], strict=True))["external_id"] == "'=b"
    assert dict(zip(header, rows[4], strict=True))["output"] == "'-2+3"
    assert dict(zip(header, rows[5], strict=True))["output"] == "-3.5"
    assert dict(zip(header, rows[3], strict=True))["input"] == (
        '{"question": "2, \\"quoted\\"\\nline"}'
    )


def test_run_jsonl_keeps_json_values(run: Run) -> None:
    lines = list(run_export_lines(run=run, format="jsonl"))

    rows = [json.loads(line) for line in lines]
    assert len(rows) == 6
    assert rows[2]["input"] == {"question": '2, "quoted"\nline'}
    assert rows[5]["output"] == -3.5
    assert rows[1]["output"] == "=cmd|' /C calc'!A0"


# -- memory flat in the number of results ------------------------------------------


def test_first_row_needs_one_chunk_of_scores_only(run: Run) -> None:
    rows = run_export_rows(run=run, chunk_size=2)

    with CaptureQueriesContext(connection) as queries:
        next(rows)

    # The results cursor and the first chunk's scores: a run that never
    # stored a step reads none.
    assert len(queries) == 2
    rows.close()


def test_scores_are_read_once_per_chunk_and_results_once(run: Run) -> None:
    with CaptureQueriesContext(connection) as queries:
        rows = list(run_export_rows(run=run, chunk_size=2))

    assert len(rows) == 6
    score_queries = [q for q in queries if "runs_score" in q["sql"]]
    assert len(score_queries) == 3
    assert not [q for q in queries if "runs_step" in q["sql"]]
    assert len(queries) == 1 + 3
    assert {(row["step_count"], row["tool_call_count"]) for row in rows} == {(0, 0)}


def test_a_run_with_steps_reads_them_once_per_chunk(run: Run) -> None:
    Run.objects.filter(pk=run.pk).update(has_steps=True)
    run.refresh_from_db()

    with CaptureQueriesContext(connection) as queries:
        rows = list(run_export_rows(run=run, chunk_size=2))

    assert len(rows) == 6
    step_queries = [q for q in queries if "runs_step" in q["sql"]]
    assert len(step_queries) == 3
    assert len(queries) == 1 + 3 + 3


def test_results_are_read_through_a_chunked_cursor(
    run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    from django.db.models.query import QuerySet

    chunk_sizes: list[int] = []
    iterator = QuerySet.iterator

    def recorded(self: QuerySet, chunk_size: int | None = None):  # type: ignore[no-untyped-def]
        chunk_sizes.append(chunk_size)
        return iterator(self, chunk_size=chunk_size)

    monkeypatch.setattr(QuerySet, "iterator", recorded)

    list(run_export_rows(run=run, chunk_size=4))

    assert chunk_sizes == [4]


@pytest.mark.parametrize("chunk_size", [1, 3, 4])
def test_chunks_splitting_an_items_epochs_give_the_same_rows(
    run: Run, chunk_size: int
) -> None:
    whole = list(run_export_rows(run=run, chunk_size=1000))

    assert list(run_export_rows(run=run, chunk_size=chunk_size)) == whole


# -- skipped scores and a judge's usage ------------------------------------------


@pytest.fixture
def judged_run(project: Project) -> Run:
    """exact_match on every result; a judge only where exact_match failed."""
    dataset = make_dataset(project, arithmetic_items(3), name="judged")
    run = make_run(dataset, scorers=["exact_match"])
    run.scorers = [
        {"kind": "exact_match", "name": "exact_match", "params": {}},
        {
            "kind": "llm_judge",
            "name": "judge",
            "params": {"base_url": "https://judge.example/v1", "model": "j"},
            "when": {"scorer": "exact_match", "passed": False},
        },
    ]
    run.save(update_fields=["scorers"])
    a, b, c = dataset.items.order_by("index")
    add_result(run, a, {"exact_match": 1.0})
    Score.objects.create(
        result=Result.objects.get(run=run, item=a),
        scorer="judge",
        skipped=True,
        reason="skipped: exact_match passed",
    )
    result = add_result(run, b, {"exact_match": 0.0})
    Score.objects.create(
        result=result,
        scorer="judge",
        value=1.0,
        passed=True,
        reason="The answer is 3, as expected.\nVerdict: PASS",
        prompt_tokens=120,
        completion_tokens=7,
        cost=0.00042,
        model="j",
    )
    add_result(run, c, {"exact_match": "failed"})
    return run


def test_a_skipped_score_is_neither_passed_nor_failed_in_jsonl(judged_run: Run) -> None:
    lines = list(run_export_lines(run=judged_run, format="jsonl"))
    skipped, judged, failed = (json.loads(line) for line in lines)

    assert list(skipped) == export_columns(run=judged_run)
    assert skipped["judge.skipped"] is True
    assert skipped["judge.passed"] is None
    assert skipped["judge.value"] is None
    assert skipped["exact_match.skipped"] is False
    assert judged["judge.skipped"] is False
    assert judged["judge.passed"] is True
    assert failed["judge.skipped"] is False
    assert failed["judge.passed"] is None


def test_a_judges_tokens_and_cost_are_exported(judged_run: Run) -> None:
    rows = [
        json.loads(line) for line in run_export_lines(run=judged_run, format="jsonl")
    ]

    assert (rows[1]["judge.prompt_tokens"], rows[1]["judge.completion_tokens"]) == (
        120,
        7,
    )
    assert rows[1]["judge.cost"] == pytest.approx(0.00042)
    assert rows[0]["judge.cost"] is None
    # Scorers that call no model have no usage columns.
    assert "exact_match.cost" not in rows[0]


def test_csv_says_skipped_in_the_passed_column_under_a_stable_header(
    judged_run: Run,
) -> None:
    text = "".join(run_export_lines(run=judged_run, format="csv"))

    header, *rows = list(csv.reader(io.StringIO(text, newline="")))

    assert header == export_columns(run=judged_run, format="csv")
    assert header[-11:] == [
        "exact_match.value",
        "exact_match.passed",
        "exact_match.error",
        "exact_match.reason",
        "judge.value",
        "judge.passed",
        "judge.error",
        "judge.reason",
        "judge.prompt_tokens",
        "judge.completion_tokens",
        "judge.cost",
    ]
    cells = [dict(zip(header, row, strict=True)) for row in rows]
    assert [cell["judge.passed"] for cell in cells] == ["skipped", "true", ""]
    assert [cell["exact_match.passed"] for cell in cells] == ["true", "false", ""]
    assert cells[1]["judge.cost"] == "0.00042"
    assert cells[1]["judge.prompt_tokens"] == "120"


def test_every_scorers_reason_is_exported(judged_run: Run) -> None:
    jsonl = [
        json.loads(line) for line in run_export_lines(run=judged_run, format="jsonl")
    ]
    text = "".join(run_export_lines(run=judged_run, format="csv"))
    header, *rows = list(csv.reader(io.StringIO(text, newline="")))
    cells = [dict(zip(header, row, strict=True)) for row in rows]

    judged = "The answer is 3, as expected.\nVerdict: PASS"
    assert [row["judge.reason"] for row in jsonl] == [
        "skipped: exact_match passed",
        judged,
        None,  # no score: the target call failed
    ]
    assert [cell["judge.reason"] for cell in cells] == [
        "skipped: exact_match passed",
        judged,
        "",
    ]
    assert "exact_match.reason" in jsonl[0]
