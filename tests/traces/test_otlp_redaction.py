"""Spans an agent exports quote what its model and tools were sent: the run's
secrets in them are replaced before their steps are stored."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceResponse,
)
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode

from runs.models import Project, ProjectSecret, Result, Run, Step
from runs.projects.services import api_key_create
from runs.results.services import run_create
from runs.testing.key_forms import echoed, leaks
from tests.factories import make_dataset, store_outcomes
from tests.stored_texts import exported_text, store_secret, stored_text

URL = "/api/v1/otlp/v1/traces"
AGENT_URL = "https://agent.example.org/run"
KEY = "agent-key-Rm3xW8qT1vN6bY4z"

pytestmark = pytest.mark.django_db(transaction=True)


def agent_run(project: Project, user: User) -> Run:
    """A finished run of an agent behind the http target, sent KEY."""
    store_secret(project, user, "AGENT", KEY, url=AGENT_URL)
    run = run_create(
        user=user,
        dataset=make_dataset(project, [{"id": "q", "input": "q", "expected": "a"}]),
        target_kind="http",
        target_config={"url": AGENT_URL, "auth_secret": "AGENT"},
        scorers=["exact_match"],
        launch=False,
    )
    return store_outcomes(run, [{"scores": [("exact_match", True, "")]}])


def echoing_spans(result_id: int) -> list[ReadableSpan]:
    """A model call and a tool call that quote the key, in several forms."""
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("agent")
    messages = [{"role": "user", "content": f"use {echoed(KEY, 'base64')}"}]
    with tracer.start_as_current_span(
        "chat",
        attributes={
            "evalsite.result_id": result_id,
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": f"small {KEY}",
            "gen_ai.input.messages": json.dumps(messages),
            "gen_ai.output.messages": json.dumps([{"content": KEY[::-1]}]),
        },
    ):
        pass
    with tracer.start_as_current_span(
        "execute_tool",
        attributes={
            "evalsite.result_id": result_id,
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "search",
            "gen_ai.tool.call.id": f"call {KEY}",
            "gen_ai.tool.call.arguments": json.dumps({"token": KEY}),
            "gen_ai.tool.call.result": f"hex {echoed(KEY, 'hex')}",
        },
    ) as tool:
        tool.set_status(Status(StatusCode.ERROR, f"401 for {echoed(KEY, 'spaced')}"))
    provider.shutdown()
    return list(memory.get_finished_spans())


def post(client: Client, user: User, spans: list[ReadableSpan]) -> Any:
    key = api_key_create(user=user, name="agent")[1]
    return client.post(
        URL,
        data=encode_spans(spans).SerializeToString(),
        content_type="application/x-protobuf",
        headers={"Authorization": f"Bearer {key}"},
    )


def test_spans_quoting_the_runs_secret_are_stored_redacted(
    client: Client, alice: User, project: Project
) -> None:
    run = agent_run(project, alice)
    result = Result.objects.get(run=run)

    assert post(client, alice, echoing_spans(result.pk)).status_code == 200

    model, tool = Step.objects.filter(result=result).order_by("index")
    assert model.name == "small [redacted secret auth]"
    assert tool.arguments == {"token": "[redacted secret auth]"}
    assert tool.error == "401 for [redacted secret auth]"
    for text in (stored_text(run), exported_text(run)):
        assert leaks(text, KEY) == []


def test_spans_of_a_run_whose_secrets_cannot_be_read_are_refused(
    client: Client, alice: User, project: Project
) -> None:
    run = agent_run(project, alice)
    result = Result.objects.get(run=run)
    ProjectSecret.objects.filter(project=project, name="AGENT").delete()

    answer = post(client, alice, echoing_spans(result.pk))

    assert answer.status_code == 200
    partial = ExportTraceServiceResponse()
    partial.ParseFromString(answer.content)
    assert partial.partial_success.rejected_spans == 2
    message = partial.partial_success.error_message
    assert f"run {run.pk}: its secrets cannot be read" in message
    assert "AGENT" in message
    assert not Step.objects.exists()
