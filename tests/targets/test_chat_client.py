"""The chat endpoint's client: what it adds to the shared HTTP client, and
what it keeps of an error or a malformed reply. (A key the endpoint echoes is
replaced where the item's outcome is recorded: tests/executor/test_redaction.py.)"""

from __future__ import annotations

import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler

import pytest

from runs.calls.chat_client import ChatClient, EndpointParams
from runs.models import ErrorKind
from runs.secrets.store import TargetContext
from runs.targets import TargetError, TargetInput
from runs.targets.openai_chat import OpenAIChatTarget
from tests.local_http import serve

KEY = "sk-live-0123456789abcdef"


class _Echo(BaseHTTPRequestHandler):
    """Answers as the body asks, echoing the Authorization header it got."""

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        sent = self.headers.get("Authorization")
        headers = {"Content-Type": "application/json"}
        if b"refuse" in body:
            status = 429
            payload: object = {"error": {"message": f"slow down, {sent}"}}
            headers["Retry-After"] = "7"
        elif b"garble" in body:
            status, payload = 200, {"choices": [], "echo": sent}
        else:
            status = 200
            payload = {
                "choices": [{"message": {"content": f"ok {sent}"}}],
                "usage": {"prompt_tokens": 3, "completion_tokens": -1},
            }
        data = json.dumps(payload).encode()
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def echo() -> Iterator[str]:
    with serve(_Echo) as base_url:
        yield base_url


def config(base_url: str) -> EndpointParams:
    return EndpointParams(base_url=base_url, model="m", api_key_secret="KEY")


def payload(text: str) -> dict[str, object]:
    return {"model": "m", "messages": [{"role": "user", "content": text}]}


async def test_a_status_error_is_classified_with_retry_after(
    echo: str,
) -> None:
    client = ChatClient(config(echo), TargetContext(secrets={"api_key": KEY}))
    try:
        with pytest.raises(TargetError) as caught:
            await client.complete(payload("refuse"))
    finally:
        await client.aclose()
    error = caught.value
    assert error.kind == ErrorKind.TRANSIENT
    assert error.http_status == 429
    assert error.retry_after == 7.0
    assert error.message.startswith("HTTP 429 Too Many Requests: slow down, Bearer")
    assert "slow down" in (error.raw_body or "")


async def test_a_malformed_reply_keeps_its_body(echo: str) -> None:
    client = ChatClient(config(echo), TargetContext(secrets={"api_key": KEY}))
    try:
        with pytest.raises(TargetError) as caught:
            await client.complete(payload("garble"))
    finally:
        await client.aclose()
    assert caught.value.error_type == "MalformedResponse"
    assert '"choices": []' in (caught.value.raw_body or "")


async def test_the_target_reads_no_negative_count(
    echo: str,
) -> None:
    target = OpenAIChatTarget.from_config(
        config(echo).model_dump(), TargetContext(secrets={"api_key": KEY})
    )
    try:
        answer = await target.generate(
            TargetInput(index=0, external_id="a", input="hi", expected=None)
        )
    finally:
        await target.aclose()
    assert answer.output.startswith("ok Bearer ")
    assert answer.prompt_tokens == 3
    assert answer.completion_tokens is None
