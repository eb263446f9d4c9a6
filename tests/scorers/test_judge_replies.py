"""Structured judge replies: a schema per verdict format, what each endpoint
takes found out once and remembered, and the fall-backs to plain text."""

from __future__ import annotations

import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import jsonschema
import pytest
from asgiref.sync import sync_to_async

from runs.models import Project
from runs.plugins.targets import TargetError, TargetInput
from runs.scorers import build_scorer, judge_replies
from runs.scorers.judge_replies import forget_endpoints, refuses_format, verdict_schema
from runs.testing.fake_judge import judge_content, schema_of
from runs.testing.fake_openai import FakeOpenAIServer
from tests.local_http import serve
from tests.scorers.test_llm_judge import echo_run, judge, run_and_scores

FORMATS = ["pass_fail", "scale_1_5", "scale_0_10", "json"]
ITEMS = [
    {"id": "right", "input": "Paris", "expected": "Paris"},
    {"id": "wrong", "input": "Lyon", "expected": "Paris"},
    {"id": "right2", "input": "Rome", "expected": "rome"},
    {"id": "wrong2", "input": "Milan", "expected": "Rome"},
]
EXPECTED = {"right": True, "wrong": False, "right2": True, "wrong2": False}


@pytest.fixture(autouse=True)
def _fresh_endpoints() -> Iterator[None]:
    forget_endpoints()
    yield
    forget_endpoints()


@pytest.fixture
def server(request: pytest.FixtureRequest) -> Iterator[FakeOpenAIServer]:
    """A fake server built with the options the test gives (indirectly)."""
    fake = FakeOpenAIServer(**getattr(request, "param", {}))
    fake.start()
    try:
        yield fake
    finally:
        fake.stop()


def verdicts(scores: dict[str, Any]) -> dict[str, bool | None]:
    return {name: score.passed for name, score in scores.items()}


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_has_a_schema_the_fake_judge_follows(fmt: str) -> None:
    schema = verdict_schema(fmt)
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["required"] == list(schema["properties"])
    assert schema["additionalProperties"] is False
    for form in ("json_schema", "json_object"):
        response_format = judge_replies.response_format(form, schema)
        assert schema_of(response_format) == schema
        prompt = "Grade it.\n\nReference answer:\nParis\n\nAnswer:\nParis\n"
        reply = json.loads(judge_content(response_format, prompt))
        jsonschema.validate(reply, schema)


def test_refusals_are_told_from_other_failures() -> None:
    body = '{"error": {"message": "response_format.type must be \'text\'"}}'
    assert refuses_format(TargetError("400", http_status=400, raw_body=body))
    assert not refuses_format(TargetError("400", http_status=400, raw_body="bad key"))
    assert not refuses_format(TargetError("500", http_status=500, raw_body=body))


@pytest.mark.parametrize("server", [{"prose_judge": True}], indirect=True)
@pytest.mark.django_db(transaction=True)
async def test_a_prose_judge_cannot_be_read_unconstrained(
    project: Project, server: FakeOpenAIServer
) -> None:
    spec = judge(server.base_url, structured_reply="off")
    run = await sync_to_async(echo_run)(project, ITEMS, [spec])
    scores = await run_and_scores(run)

    assert all(s.error.startswith("unreadable judge reply") for s in scores.values())
    assert scores["wrong"].reason == 'The answer to the question should be "Paris".'


@pytest.mark.parametrize("server", [{"prose_judge": True}], indirect=True)
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("fmt", FORMATS)
async def test_a_prose_judge_held_to_a_schema_gives_readable_verdicts(
    project: Project, server: FakeOpenAIServer, fmt: str
) -> None:
    spec = judge(server.base_url, verdict_format=fmt)
    run = await sync_to_async(echo_run)(project, ITEMS, [spec])
    scores = await run_and_scores(run)

    assert verdicts(scores) == EXPECTED
    assert all(score.error == "" for score in scores.values())
    sent = server.stats.last_request
    assert sent is not None and sent["response_format"]["type"] == "json_schema"
    reason = json.loads(scores["wrong"].reason)  # the reply, kept whole
    assert "does not match the reference" in reason["reasoning"]
    if fmt == "scale_1_5":
        assert (scores["right"].value, scores["wrong"].value) == (5.0, 1.0)


@pytest.mark.parametrize(
    "server",
    [{"prose_judge": True, "response_formats": frozenset({"text", "json_object"})}],
    indirect=True,
)
@pytest.mark.django_db(transaction=True)
async def test_an_older_server_gets_json_object_and_it_is_remembered(
    project: Project, server: FakeOpenAIServer
) -> None:
    spec = judge(server.base_url, max_parallel_calls=1)
    run = await sync_to_async(echo_run)(project, ITEMS, [spec], concurrency=1)
    scores = await run_and_scores(run)

    assert verdicts(scores) == EXPECTED
    assert judge_replies.accepted(server.base_url) == "json_object"
    # One refusal of json_schema, then every call in the form it takes.
    assert server.stats.statuses[400] == 1
    assert server.stats.requests == len(ITEMS) + 1

    # Another scorer of the same endpoint (another run) knows it already.
    scorer = await sync_to_async(build_scorer)({"name": "again", **spec})
    item = TargetInput(index=0, external_id="x", input="Oslo", expected="Oslo")
    try:
        reply, form = await scorer.ask_for_verdict("Oslo", item)
    finally:
        await scorer.aclose()
    assert form == "json_object"
    assert scorer.verdict(reply.content, structured=True) == (1.0, True)
    assert server.stats.statuses[400] == 1  # not asked in json_schema again
    assert server.stats.last_request is not None
    assert server.stats.last_request["response_format"]["schema"]["required"]


@pytest.mark.parametrize(
    "server", [{"response_formats": frozenset({"text"})}], indirect=True
)
@pytest.mark.django_db(transaction=True)
async def test_a_server_without_json_gets_plain_text(
    project: Project, server: FakeOpenAIServer
) -> None:
    spec = judge(server.base_url, max_parallel_calls=1)
    run = await sync_to_async(echo_run)(project, ITEMS, [spec], concurrency=1)
    scores = await run_and_scores(run)

    assert verdicts(scores) == EXPECTED
    assert scores["right"].reason.endswith("Verdict: PASS")  # read as prose
    assert judge_replies.accepted(server.base_url) == "text"
    assert server.stats.statuses[400] == 2
    assert server.stats.last_request is not None
    assert "response_format" not in server.stats.last_request


@pytest.mark.parametrize(
    "server", [{"response_formats": frozenset({"text"})}], indirect=True
)
@pytest.mark.django_db(transaction=True)
async def test_a_form_named_in_the_configuration_is_not_fallen_back_from(
    project: Project, server: FakeOpenAIServer
) -> None:
    spec = judge(server.base_url, structured_reply="json_object")
    run = await sync_to_async(echo_run)(project, ITEMS[:1], [spec])
    scores = await run_and_scores(run)

    assert scores["right"].passed is None
    assert scores["right"].error.startswith("judge call failed")
    assert "response_format.type must be 'text'" in scores["right"].reason
    assert judge_replies.accepted(server.base_url) is None


class _IgnoresFormat(BaseHTTPRequestHandler):
    """An endpoint that takes response_format and answers prose all the same."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        content = "Looks right to me.\nVerdict: PASS"
        data = json.dumps({"choices": [{"message": {"content": content}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.mark.django_db(transaction=True)
async def test_a_reply_that_ignores_the_schema_is_read_as_prose(
    project: Project,
) -> None:
    with serve(_IgnoresFormat) as base_url:
        run = await sync_to_async(echo_run)(project, ITEMS[:1], [judge(base_url)])
        scores = await run_and_scores(run)

    assert scores["right"].passed is True
    assert scores["right"].reason == "Looks right to me.\nVerdict: PASS"
