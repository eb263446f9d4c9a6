"""The fake model server's own routes."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import httpx

from runs.testing.fake_openai import FakeOpenAIServer, build_parser
from tests.processes import ROOT


def test_stats_route_counts_the_calls_received(fake_openai: FakeOpenAIServer) -> None:
    with httpx.Client(base_url=fake_openai.base_url) as client:
        for question in ("What is 1 + 2?", "What is 3 + 4?"):
            message = {"role": "user", "content": question}
            answer = client.post(
                "/chat/completions", json={"model": "m", "messages": [message]}
            )
            assert answer.status_code == 200
        stats = client.get("/stats")

    assert stats.status_code == 200
    assert stats.json() == {
        "requests": 2,
        "disconnects": 0,
        "in_flight": 0,
        "max_in_flight": 1,
    }


def _fake_server_process(port: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "runs.testing.fake_openai", "--port", str(port)],
        cwd=ROOT,
        env={k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_the_fake_server_on_a_taken_port_exits_without_announcing_it() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        process = _fake_server_process(port)
        try:
            out, err = process.communicate(timeout=60)
        finally:
            process.kill()

    assert process.returncode != 0
    assert "endpoint on" not in out  # no address of a server that is not this one
    assert f"cannot listen on 127.0.0.1:{port}" in err


def test_the_fake_server_announces_the_port_it_is_bound_to() -> None:
    process = _fake_server_process(0)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        base_url = line.split(" on ", 1)[1].strip()
        assert not base_url.endswith(":0/v1")
        # Announced after the bind: the address answers at once.
        assert httpx.get(base_url.removesuffix("/v1") + "/stats").status_code == 200
    finally:
        process.terminate()
        process.communicate(timeout=30)


GRADE = "Grade the answer.\n\nReference answer:\nParis\n\nAnswer:\nLyon\n"
VERDICT_SCHEMA = {
    "type": "object",
    "properties": {
        "reasoning": {"type": "string"},
        "verdict": {"type": "string", "enum": ["pass", "fail"]},
    },
}


def _ask(server: FakeOpenAIServer, content: str, **extra: object) -> httpx.Response:
    message = {"role": "user", "content": content}
    return httpx.post(
        f"{server.base_url}/chat/completions",
        json={"model": "m", "messages": [message], **extra},
    )


def test_an_older_server_refuses_json_schema_and_takes_json_object() -> None:
    server = FakeOpenAIServer(response_formats=frozenset({"text", "json_object"}))
    server.start()
    try:
        wrapped = {"name": "v", "schema": VERDICT_SCHEMA}
        refused = _ask(
            server,
            GRADE,
            response_format={"type": "json_schema", "json_schema": wrapped},
        )
        taken = _ask(
            server,
            GRADE,
            response_format={"type": "json_object", "schema": VERDICT_SCHEMA},
        )
    finally:
        server.stop()

    assert refused.status_code == 400
    assert "response_format" in refused.json()["error"]["message"]
    content = taken.json()["choices"][0]["message"]["content"]
    assert json.loads(content)["verdict"] == "fail"


def test_a_prose_judge_answers_without_a_verdict_unless_held_to_a_schema() -> None:
    server = FakeOpenAIServer(prose_judge=True)
    server.start()
    try:
        prose = _ask(server, GRADE)
        held = _ask(
            server,
            GRADE,
            response_format={
                "type": "json_schema",
                "json_schema": {"name": "v", "schema": VERDICT_SCHEMA},
            },
        )
        other = _ask(server, "What is 2 + 2?", response_format={"type": "json_object"})
    finally:
        server.stop()

    text = prose.json()["choices"][0]["message"]["content"]
    assert text == 'The answer to the question should be "Paris".'
    reply = json.loads(held.json()["choices"][0]["message"]["content"])
    assert reply == {"reasoning": reply["reasoning"], "verdict": "fail"}
    # A request that is not a grading one keeps its JSON answer.
    assert json.loads(other.json()["choices"][0]["message"]["content"]) == {
        "answer": "4"
    }


def test_the_command_line_sets_the_formats_and_the_prose_judge() -> None:
    args = build_parser().parse_args(["--response-formats", "text", "--prose-judge"])
    assert args.response_formats == "text" and args.prose_judge is True
