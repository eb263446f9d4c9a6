"""Downloads: a run's export as a streamed response, for pages and the API."""

from __future__ import annotations

from django.http import StreamingHttpResponse
from django.utils.http import content_disposition_header

from runs.analysis import export
from runs.models import Run


def export_response(*, run: Run, format: str) -> StreamingHttpResponse:
    """The run's results in ``format`` (csv or jsonl), streamed as a file."""
    filename = export.run_export_filename(run=run, format=format)
    return StreamingHttpResponse(
        export.run_export_lines(run=run, format=format),
        content_type=export.EXPORT_FORMATS[format].content_type,
        headers={
            "Content-Disposition": content_disposition_header(True, filename),
        },
    )
