"""Downloads, streamed: a run's export and a comparison's items."""

from __future__ import annotations

from collections.abc import Iterator

from django.http import StreamingHttpResponse
from django.utils.http import content_disposition_header

from runs.analysis import compare, export
from runs.models import Run

COMPARISON_COLUMNS = (
    "external_id",
    "index",
    "input",
    "expected",
    "scorer",
    "change",
    "baseline_run",
    "candidate_run",
    "baseline_result",
    "candidate_result",
    "baseline_epochs",
    "candidate_epochs",
    "baseline_stopped",
    "candidate_stopped",
    "baseline_pass_rate",
    "candidate_pass_rate",
    "baseline_score",
    "candidate_score",
    "baseline_output",
    "candidate_output",
)


def _download(
    lines: Iterator[str], *, format: str, filename: str
) -> StreamingHttpResponse:
    return StreamingHttpResponse(
        lines,
        content_type=export.EXPORT_FORMATS[format].content_type,
        headers={"Content-Disposition": content_disposition_header(True, filename)},
    )


def export_response(*, run: Run, format: str) -> StreamingHttpResponse:
    """The run's results in ``format`` (csv or jsonl), streamed as a file."""
    return _download(
        export.run_export_lines(run=run, format=format),
        format=format,
        filename=export.run_export_filename(run=run, format=format),
    )


def comparison_csv_response(
    *, baseline: Run, candidate: Run, scorer: str, change: str | None
) -> StreamingHttpResponse:
    """The paired items of (candidate, scorer) against the baseline, as CSV.

    The rows of the comparison page's items table, every one of them, with
    the same ``change`` filter; cells safe to open in a spreadsheet.
    """
    rows = compare.comparison_item_rows(
        baseline=baseline, candidate=candidate, scorer=scorer, change=change
    )
    lines = export.stream_csv(
        COMPARISON_COLUMNS, ([row[c] for c in COMPARISON_COLUMNS] for row in rows)
    )
    filename = f"compare-{baseline.pk}-{candidate.pk}-{scorer}.csv"
    return _download(lines, format="csv", filename=filename)
