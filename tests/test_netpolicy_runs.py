"""The network policy and error read-back, through whole runs against a real server."""

from __future__ import annotations

from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler

import httpx
import pytest
from asgiref.sync import sync_to_async

from runs.errors import InvalidInput
from runs.executor.engine import execute_run
from runs.models import Project, Result, Run, RunStatus
from runs.results.services import run_create
from runs.targets.openai_chat import ERROR_BODY_LIMIT, OpenAIChatTarget
from runs.testing.fake_openai import FakeOpenAIServer
from tests.factories import arithmetic_items, make_dataset
from tests.local_http import serve

pytestmark = pytest.mark.django_db(transaction=True)

INTERNAL_PAGE = "<html>INTERNAL ADMIN CONSOLE token=hunter2 " + "x" * 20_000 + "</html>"


def new_run(project: Project, base_url: str, **options: object) -> Run:
    return run_create(
        user=None,
        dataset=make_dataset(project, arithmetic_items(1)),
        target_kind="openai_chat",
        target_config={"base_url": base_url, "model": "m"},
        scorers=["exact_match"],
        options={"backoff_base_seconds": 0.01, **options},
        launch=False,
    )


class InternalService(BaseHTTPRequestHandler):
    """An internal service answering every request with a private page."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = INTERNAL_PAGE.encode()
        self.send_response(403)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        return None


@pytest.fixture
def internal_service() -> Iterator[str]:
    with serve(InternalService) as base_url:
        yield base_url


async def test_a_deny_rule_added_after_a_run_was_created_stops_it_at_start(
    project: Project, fake_openai: FakeOpenAIServer, settings
) -> None:
    run = await sync_to_async(new_run)(project, fake_openai.base_url, max_attempts=3)
    settings.EVALSITE_TARGET_DENY = ["127.0.0.1"]
    # The configuration is checked again when the run starts.
    status = await execute_run(run.pk)
    await run.arefresh_from_db()
    assert status == RunStatus.FAILED
    assert "network policy refuses connections to 127.0.0.1" in run.error
    assert fake_openai.stats.requests == 0


async def test_a_name_denied_only_at_connect_time_is_a_permanent_error(
    project: Project, fake_openai: FakeOpenAIServer, settings
) -> None:
    """``localhost`` passes the save-time check (no rule names it); its address
    is refused when the connection is made, and the attempt is not retried."""
    base_url = f"http://localhost:{fake_openai.port}/v1"
    run = await sync_to_async(new_run)(project, base_url, max_attempts=3)
    settings.EVALSITE_TARGET_DENY = ["127.0.0.0/8", "::1"]
    status = await execute_run(run.pk)
    result = await Result.objects.aget(run=run)
    assert status == RunStatus.FAILED
    assert (result.error_type, result.error_kind) == ("NetworkPolicy", "permanent")
    assert result.error_message == (
        "the network policy refuses connections to localhost: "
        "EVALSITE_TARGET_DENY names it"
    )
    assert len(result.attempts) == 1
    assert fake_openai.stats.requests == 0


def test_metadata_address_is_refused_when_a_run_is_created(project: Project) -> None:
    with pytest.raises(InvalidInput) as caught:
        new_run(project, "http://169.254.169.254/latest/meta-data")
    assert caught.value.field == "target_config.base_url"
    assert not Run.objects.exists()


def test_a_query_in_the_base_url_is_refused_when_a_run_is_created(
    project: Project, fake_openai: FakeOpenAIServer
) -> None:
    with pytest.raises(InvalidInput, match="query"):
        new_run(project, fake_openai.base_url + "?")


async def test_an_error_page_is_not_read_back(
    project: Project, internal_service: str
) -> None:
    run = await sync_to_async(new_run)(project, internal_service)
    await execute_run(run.pk)
    result = await Result.objects.aget(run=run)
    assert result.error_message == "HTTP 403 Forbidden"
    assert "INTERNAL" not in result.error_message
    raw = result.attempts[0]["raw_body"]
    assert len(raw) <= ERROR_BODY_LIMIT < len(INTERNAL_PAGE)


def test_a_json_error_message_is_quoted_short_and_printable() -> None:
    target = OpenAIChatTarget.from_config({"base_url": "http://h/v1", "model": "m"})
    message = "model not found\x1b[31m " + "y" * 1000
    response = httpx.Response(404, json={"error": {"message": message}})
    with pytest.raises(Exception) as caught:
        target.parse_response(response)
    error = caught.value
    assert str(error).startswith("HTTP 404 Not Found: model not found [31m yyy")
    assert len(str(error)) < 330
    assert "\x1b" not in str(error)
    assert error.http_status == 404


def test_a_custom_reason_phrase_is_not_read_back() -> None:
    target = OpenAIChatTarget.from_config({"base_url": "http://h/v1", "model": "m"})
    response = httpx.Response(
        403, text="<html/>", extensions={"reason_phrase": b"root:x:0:0:root"}
    )
    with pytest.raises(Exception) as caught:
        target.parse_response(response)
    assert str(caught.value) == "HTTP 403 Forbidden"


def test_an_html_error_body_gives_only_the_status_line() -> None:
    target = OpenAIChatTarget.from_config({"base_url": "http://h/v1", "model": "m"})
    response = httpx.Response(500, text=INTERNAL_PAGE)
    with pytest.raises(Exception) as caught:
        target.parse_response(response)
    assert str(caught.value) == "HTTP 500 Internal Server Error"
    assert len(caught.value.raw_body) == ERROR_BODY_LIMIT


async def test_provider_error_message_still_reaches_the_user(
    project: Project, fake_openai: FakeOpenAIServer
) -> None:
    run = await sync_to_async(run_create)(
        user=None,
        dataset=await sync_to_async(make_dataset)(
            project, [{"id": "1", "input": "x [[status:400]]", "expected": "1"}]
        ),
        target_kind="openai_chat",
        target_config={"base_url": fake_openai.base_url, "model": "m"},
        scorers=["exact_match"],
        launch=False,
    )
    await execute_run(run.pk)
    result = await Result.objects.aget(run=run)
    assert result.error_message == "HTTP 400 Bad Request: simulated 400"
