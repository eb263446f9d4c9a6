"""Spans of an instrumented agent, exported by the real OpenTelemetry SDK into
/api/v1/otlp/v1/traces, become the steps of the results they name."""

from __future__ import annotations

import base64
import gzip
import json
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceResponse,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode

from runs.models import Project, Result, Run, RunStatus, Step
from runs.projects.services import api_key_create
from runs.records.tallies import tallied_figures
from runs.results.services import run_create
from tests.factories import make_dataset, store_outcomes

URL = "/api/v1/otlp/v1/traces"
PROTOBUF = "application/x-protobuf"


def finished_run(project: Project, status: str = RunStatus.COMPLETED) -> Run:
    items = [{"id": f"q{i}", "input": f"q{i}", "expected": "a"} for i in range(3)]
    run = run_create(
        user=None,
        dataset=make_dataset(project, items),
        target_kind="python",
        target_config={"callable": "runs.targets.examples.echo"},
        scorers=["exact_match"],
        launch=False,
    )
    store_outcomes(run, [{"scores": [("exact_match", True, "")]}] * 3)
    Run.objects.filter(pk=run.pk).update(status=status)
    run.refresh_from_db()
    return run


def agent_spans(
    attributes: dict[str, Any], *, resource: dict[str, Any] | None = None
) -> list[ReadableSpan]:
    """An agent's trace as the SDK records it: its own span, a model call and
    a failing tool call beneath it; only the agent's span names the result."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create(resource or {}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("agent")
    with tracer.start_as_current_span("invoke_agent", attributes=attributes):
        with tracer.start_as_current_span(
            "chat small-model",
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": "small-model",
                "gen_ai.usage.input_tokens": 31,
                "gen_ai.usage.output_tokens": 7,
                "gen_ai.input.messages": json.dumps(
                    [{"role": "user", "content": "2+2"}]
                ),
            },
        ):
            pass
        with tracer.start_as_current_span(
            "execute_tool search",
            attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "search",
                "gen_ai.tool.call.id": "call_1",
                "gen_ai.tool.call.arguments": json.dumps({"q": "2+2"}),
            },
        ) as tool:
            tool.set_status(Status(StatusCode.ERROR, "search is down"))
    provider.shutdown()
    return list(memory.get_finished_spans())


def post(client: Client, key: str, spans: list[ReadableSpan], **headers: str) -> Any:
    body = encode_spans(spans).SerializeToString()
    return client.post(
        URL,
        data=body,
        content_type=PROTOBUF,
        headers={"Authorization": f"Bearer {key}", **headers},
    )


@pytest.fixture
def alice_key(alice: User) -> str:
    return api_key_create(user=alice, name="agent")[1]


@pytest.mark.django_db(transaction=True)
def test_spans_exported_by_the_sdk_become_the_results_steps(
    live_server: Any, project: Project, alice_key: str
) -> None:
    run = finished_run(project)
    exporter = OTLPSpanExporter(
        endpoint=f"{live_server.url}{URL}",
        headers={"Authorization": f"Bearer {alice_key}"},
    )
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    spans = agent_spans({"evalsite.run_id": run.pk, "evalsite.item_index": 1})
    assert exporter.export(spans).name == "SUCCESS"

    result = Result.objects.get(run=run, item_index=1)
    steps = list(Step.objects.filter(result=result).order_by("index"))
    assert [(s.index, s.kind, s.name) for s in steps] == [
        (0, "model", "small-model"),
        (1, "tool", "search"),
    ]
    model, tool = steps
    assert (model.prompt_tokens, model.completion_tokens) == (31, 7)
    assert model.arguments == [{"role": "user", "content": "2+2"}]
    assert model.latency_ms is not None and model.started_at is not None
    assert (tool.arguments, tool.call_id, tool.error) == (
        {"q": "2+2"},
        "call_1",
        "search is down",
    )
    assert tool.call_hash and len(tool.span_id) == 16
    assert not Step.objects.exclude(result=result).exists()


@pytest.mark.django_db(transaction=True)
def test_a_span_sent_twice_is_stored_once(
    client: Client, project: Project, alice_key: str
) -> None:
    run = finished_run(project)
    result = Result.objects.get(run=run, item_index=0)
    spans = agent_spans({"evalsite.result_id": result.pk})
    for _ in range(2):
        answer = post(client, alice_key, spans)
        assert answer.status_code == 200, answer.content
    assert Step.objects.filter(result=result).count() == 2


@pytest.mark.django_db(transaction=True)
def test_steps_attached_to_a_going_run_keep_its_score_tallies(
    client: Client, project: Project, alice_key: str
) -> None:
    # A trace's steps change no score: the run's live scorers' figures are
    # still the sums of its tallies (runs/records/tallies.py), at the
    # revision the steps moved.
    run = finished_run(project, status=RunStatus.RUNNING)
    assert run.tallied
    spans = agent_spans({"evalsite.run_id": run.pk, "evalsite.item_index": 1})

    answer = post(client, alice_key, spans)
    run.refresh_from_db()

    assert answer.status_code == 200, answer.content
    assert run.revision == 1 and run.tally_revision == 1 and run.tallied
    assert tallied_figures(run) is not None


@pytest.mark.django_db(transaction=True)
def test_resource_attributes_name_the_result_and_json_is_read(
    client: Client, project: Project, alice_key: str
) -> None:
    run = finished_run(project)
    spans = agent_spans(
        {}, resource={"evalsite.run_id": run.pk, "evalsite.item_index": 2}
    )
    document = _as_otlp_json(encode_spans(spans))
    answer = client.post(
        URL,
        data=json.dumps(document),
        content_type="application/json",
        headers={"Authorization": f"Bearer {alice_key}"},
    )
    assert answer.status_code == 200, answer.content
    assert answer.json() == {}
    result = Result.objects.get(run=run, item_index=2)
    assert Step.objects.filter(result=result).count() == 2


def _as_otlp_json(request: Any) -> dict[str, Any]:
    """OTLP's JSON: protobuf's mapping with hex trace and span ids."""
    document = json_format.MessageToDict(request)
    for resource in document["resourceSpans"]:
        for scope in resource["scopeSpans"]:
            for span in scope["spans"]:
                for name in ("traceId", "spanId", "parentSpanId"):
                    if name in span:
                        span[name] = base64.b64decode(span[name]).hex()
    return document


@pytest.mark.django_db(transaction=True)
def test_another_projects_run_is_refused_like_one_that_does_not_exist(
    client: Client, project: Project, other_project: Project, alice_key: str
) -> None:
    mine = finished_run(project)
    theirs = finished_run(other_project)
    answers = []
    for run_id in (theirs.pk, theirs.pk + 1000):
        # A batch of two agents' spans: one of them not the caller's.
        spans = agent_spans({"evalsite.run_id": mine.pk, "evalsite.item_index": 0})
        spans += agent_spans({"evalsite.run_id": run_id, "evalsite.item_index": 0})
        answer = post(client, alice_key, spans)
        answers.append((answer.status_code, answer.json()["detail"]))
    assert answers == [
        (404, f"no run {theirs.pk}"),
        (404, f"no run {theirs.pk + 1000}"),
    ]
    result_of_theirs = Result.objects.filter(run=theirs).first()
    spans = agent_spans({"evalsite.result_id": result_of_theirs.pk})
    answer = post(client, alice_key, spans)
    assert (answer.status_code, answer.json()["detail"]) == (
        404,
        f"no result {result_of_theirs.pk}",
    )
    assert not Step.objects.exists()  # nothing of the batch was stored


def _partial(body: bytes) -> tuple[int, str]:
    answer = ExportTraceServiceResponse()
    answer.ParseFromString(body)
    return answer.partial_success.rejected_spans, answer.partial_success.error_message


@pytest.mark.django_db(transaction=True)
def test_a_viewer_cannot_attach_steps(
    client: Client, project: Project, victor: User
) -> None:
    run = finished_run(project)
    key = api_key_create(user=victor, name="agent")[1]
    spans = agent_spans({"evalsite.run_id": run.pk, "evalsite.item_index": 0})
    assert post(client, key, spans).status_code == 403
    assert not Step.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_finished_runs_missing_result_is_a_rejected_span(
    client: Client, project: Project, alice_key: str
) -> None:
    run = finished_run(project)
    spans = agent_spans({"evalsite.run_id": run.pk, "evalsite.item_index": 9})
    answer = post(client, alice_key, spans)
    assert answer.status_code == 200
    assert _partial(answer.content) == (
        2,
        f"run {run.pk} has no result for item 9 epoch 0",
    )


@pytest.mark.django_db(transaction=True)
def test_a_result_not_stored_yet_asks_the_exporter_to_retry(
    client: Client, project: Project, alice_key: str
) -> None:
    run = finished_run(project, status=RunStatus.RUNNING)
    Result.objects.filter(run=run, item_index=1).delete()
    spans = agent_spans({"evalsite.run_id": run.pk, "evalsite.item_index": 1})
    answer = post(client, alice_key, spans)
    assert answer.status_code == 503
    assert answer["Retry-After"] == "2"
    assert "has not stored item 1 epoch 0 yet" in answer.json()["detail"]


@pytest.mark.django_db(transaction=True)
def test_spans_naming_no_result_are_rejected_and_other_spans_ignored(
    client: Client, project: Project, alice_key: str
) -> None:
    spans = agent_spans({})
    rejected, message = _partial(post(client, alice_key, spans).content)
    assert rejected == 2  # the model and tool spans; the agent's is no step
    assert "names no result" in message


@pytest.mark.django_db(transaction=True)
def test_gzip_is_read_and_bad_bodies_get_a_clear_400(
    client: Client, project: Project, alice_key: str, settings: Any
) -> None:
    run = finished_run(project)
    spans = agent_spans({"evalsite.run_id": run.pk, "evalsite.item_index": 0})
    auth = {"Authorization": f"Bearer {alice_key}"}
    body = encode_spans(spans).SerializeToString()
    zipped = client.post(
        URL,
        data=gzip.compress(body),
        content_type=PROTOBUF,
        headers={**auth, "Content-Encoding": "gzip"},
    )
    assert zipped.status_code == 200
    assert Step.objects.count() == 2

    cases = [
        (b"\xff\xff\xff", PROTOBUF, {}, "does not decode"),
        (b"{", "application/json", {}, "does not parse"),
        (body, "text/plain", {}, "Content-Type must be"),
        (b"not gzip", PROTOBUF, {"Content-Encoding": "gzip"}, "does not inflate"),
        (body, PROTOBUF, {"Content-Encoding": "br"}, "is not gzip or identity"),
    ]
    for data, kind, extra, words in cases:
        answer = client.post(
            URL, data=data, content_type=kind, headers={**auth, **extra}
        )
        assert answer.status_code == 400, (words, answer.content)
        assert words in answer.json()["detail"]

    settings.EVALSITE_MAX_OTLP_BYTES = 1024
    bomb = gzip.compress(b"\0" * 10_000_000)
    answer = client.post(
        URL,
        data=bomb,
        content_type=PROTOBUF,
        headers={**auth, "Content-Encoding": "gzip"},
    )
    assert answer.status_code == 400
    assert "EVALSITE_MAX_OTLP_BYTES" in answer.json()["detail"]


def test_anonymous_exports_get_401(client: Client, db: None) -> None:
    answer = client.post(URL, data=b"", content_type=PROTOBUF)
    assert answer.status_code == 401
