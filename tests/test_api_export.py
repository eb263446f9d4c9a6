"""GET /api/v1/runs/{id}/export and /runs/<id>/export.<format>: a run's results
as a streamed download, for members only; streamed under ASGI too."""

from __future__ import annotations

import csv
import io
import json
import threading
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import HttpCommunicator
from django.contrib.auth.models import User
from django.db import connections
from django.http import StreamingHttpResponse
from django.test import Client
from django.urls import reverse

from runs.analysis.export import export_columns
from runs.models import Project, Run
from tests.export_runs import exported_run

API = "/api/v1"


@pytest.fixture
def run(project: Project) -> Run:
    return exported_run(project)


def _body(response: StreamingHttpResponse) -> str:
    return b"".join(response.streaming_content).decode()


def test_csv_export_is_a_streamed_download(alice_client: Client, run: Run) -> None:
    response = alice_client.get(f"{API}/runs/{run.pk}/export", {"format": "csv"})

    assert response.status_code == 200
    assert response.streaming
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"] == (
        f'attachment; filename="run-{run.pk}-export-me.csv"'
    )


def test_csv_export_parses_back_with_every_result(
    alice_client: Client, run: Run
) -> None:
    response = alice_client.get(f"{API}/runs/{run.pk}/export", {"format": "csv"})

    header, *rows = csv.reader(io.StringIO(_body(response), newline=""))
    assert header == export_columns(run=run, format="csv")
    assert len(rows) == 6
    assert rows[1][header.index("output")] == "'=cmd|' /C calc'!A0"


def test_jsonl_is_the_default_format(alice_client: Client, run: Run) -> None:
    response = alice_client.get(f"{API}/runs/{run.pk}/export")

    assert response["Content-Type"] == "application/x-ndjson; charset=utf-8"
    rows = [json.loads(line) for line in _body(response).splitlines()]
    assert [(row["item_index"], row["epoch"]) for row in rows][:3] == [
        (0, 0),
        (0, 1),
        (1, 0),
    ]
    assert rows[2]["status"] == "failed"
    assert rows[1]["contains.error"] == "judge timed out"


def test_unknown_format_is_refused_naming_it(alice_client: Client, run: Run) -> None:
    response = alice_client.get(f"{API}/runs/{run.pk}/export", {"format": "xlsx"})

    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["query", "format"]


def test_viewer_may_export(victor_client: Client, run: Run) -> None:
    response = victor_client.get(f"{API}/runs/{run.pk}/export", {"format": "csv"})

    assert response.status_code == 200


def test_outsider_gets_404_from_the_api(mallory_client: Client, run: Run) -> None:
    response = mallory_client.get(f"{API}/runs/{run.pk}/export", {"format": "csv"})

    assert response.status_code == 404
    assert response.json()["detail"] == f"no run {run.pk}"


def test_anonymous_gets_401(client: Client, run: Run) -> None:
    assert client.get(f"{API}/runs/{run.pk}/export").status_code == 401


# -- the page route and the buttons ------------------------------------------------


def test_page_route_downloads_csv(alice_client: Client, run: Run) -> None:
    response = alice_client.get(reverse("runs:run_export", args=[run.pk, "csv"]))

    assert response.status_code == 200
    assert response["Content-Disposition"].startswith("attachment;")
    assert _body(response).startswith(",".join(export_columns(run=run)[:3]))


def test_page_route_with_unknown_format_is_404(alice_client: Client, run: Run) -> None:
    response = alice_client.get(reverse("runs:run_export", args=[run.pk, "xlsx"]))

    assert response.status_code == 404


def test_outsider_gets_404_from_the_page_route(
    mallory_client: Client, run: Run
) -> None:
    response = mallory_client.get(reverse("runs:run_export", args=[run.pk, "csv"]))

    assert response.status_code == 404


def test_run_page_links_both_downloads(alice_client: Client, run: Run) -> None:
    page = alice_client.get(reverse("runs:run_detail", args=[run.pk])).content.decode()

    for format in ("csv", "jsonl"):
        assert f'href="{reverse("runs:run_export", args=[run.pk, format])}"' in page


# -- under ASGI (evalsite/handlers.py) ---------------------------------------------


@pytest.fixture
def application(settings: Any) -> Iterator[Callable[..., Any]]:
    """The HTTP application as evalsite/asgi.py builds it (one pool thread)."""
    from evalsite import asgi

    settings.EVALSITE_HTTP_THREADS = 1
    app = asgi.get_asgi_application()
    yield app
    app.executor.submit(connections.close_all).result()
    app.executor.shutdown()


def _session_cookie(user: User) -> list[tuple[bytes, bytes]]:
    client = Client()
    client.force_login(user)
    return [(b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode())]


@pytest.mark.django_db(transaction=True)
async def test_export_streams_under_asgi_without_buffering_warning(
    alice: User, project: Project, application: Callable[..., Any]
) -> None:
    run = await sync_to_async(exported_run)(project)
    cookie = await sync_to_async(_session_cookie)(alice)
    expected = await sync_to_async(
        lambda: _body(
            Client(headers={"cookie": cookie[0][1].decode()}).get(
                f"{API}/runs/{run.pk}/export", {"format": "csv"}
            )
        )
    )()
    communicator = HttpCommunicator(
        application,
        "GET",
        f"{API}/runs/{run.pk}/export?format=csv",
        headers=[(b"host", b"testserver"), *cookie],
    )
    with warnings.catch_warnings():
        # Django's handler reads a sync streaming body whole, with this warning.
        warnings.filterwarnings("error", message=".*synchronous iterators.*")
        start, body = await _streamed_response(communicator)

    assert start["status"] == 200
    assert body.decode() == expected


async def _streamed_response(
    communicator: HttpCommunicator,
) -> tuple[dict[str, Any], bytes]:
    """The start message and the body; the last message may have no body (which
    ``HttpCommunicator.get_response`` does not accept)."""
    await communicator.send_input({"type": "http.request", "body": b""})
    start = await communicator.receive_output(30)
    body = b""
    while True:
        message = await communicator.receive_output(30)
        body += message.get("body", b"")
        if not message.get("more_body"):
            await communicator.wait(30)  # the response is closed, then the call ends
            return start, body


async def test_sync_stream_is_read_in_batches_on_one_thread_of_its_own() -> None:
    from evalsite.handlers import STREAM_BATCH_BYTES, _ThreadedBody

    produced: list[str] = []
    part = b"x" * 1024

    def parts() -> Iterator[bytes]:
        for _ in range(4 * STREAM_BATCH_BYTES // len(part)):
            produced.append(threading.current_thread().name)
            yield part

    response = StreamingHttpResponse(parts())
    body = _ThreadedBody.wrap(response)
    assert body is not None
    batches = aiter(response)

    first = await anext(batches)

    assert len(first) == STREAM_BATCH_BYTES
    assert len(produced) == STREAM_BATCH_BYTES // len(part)
    rest = [batch async for batch in batches]
    assert len(first) + sum(map(len, rest)) == 4 * STREAM_BATCH_BYTES
    assert len(set(produced)) == 1
    assert produced[0] != threading.current_thread().name
    await body.close_response(fallback=None)  # type: ignore[arg-type]
