"""The executor's HTTP client (``runs.calls.keepalive`` behind ``PolicyClient``)
against a real server: connections kept alive and reused, answers in chunks
or until the server closes, a server that closes mid-answer or never answers,
an answer too large, and the network policy at connect time."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler

import httpx
import pytest

from runs.calls import keepalive
from runs.calls.http_client import PolicyClient
from runs.calls.keepalive import CallError, Pool, header_lines
from runs.calls.netpolicy import NetworkPolicy, PolicyRefused
from runs.models import ErrorKind
from runs.targets import TargetError
from runs.testing.fake_openai import FakeOpenAIServer
from tests.local_http import serve

HEADERS = httpx.Headers({"Content-Type": "application/json"})
LOOPBACK = NetworkPolicy.parse(["loopback"], [])


def chat(fake: FakeOpenAIServer) -> httpx.URL:
    return httpx.URL(f"{fake.base_url}/chat/completions")


def ask(question: str) -> dict[str, object]:
    return {"model": "m", "messages": [{"role": "user", "content": question}]}


async def content(client: PolicyClient, url: httpx.URL, question: str) -> str:
    answer = await client.send("POST", url, headers=HEADERS, body=ask(question))
    assert answer.status_code == 200, answer.text
    return answer.json()["choices"][0]["message"]["content"]


async def test_one_connection_serves_calls_one_after_another(
    fake_openai: FakeOpenAIServer,
) -> None:
    client = PolicyClient()
    try:
        for n in range(5):
            assert await content(client, chat(fake_openai), f"What is {n} + 1?") == (
                str(n + 1)
            )
    finally:
        await client.aclose()
    assert (fake_openai.stats.requests, fake_openai.stats.connections) == (5, 1)


async def test_calls_in_flight_together_each_have_a_connection_then_reuse_them(
    fake_openai: FakeOpenAIServer,
) -> None:
    client = PolicyClient()
    url = chat(fake_openai)
    try:
        for _ in range(3):
            answers = await asyncio.gather(
                *(content(client, url, f"What is {n} * 2?") for n in range(4))
            )
            assert answers == ["0", "2", "4", "6"]
    finally:
        await client.aclose()
    assert fake_openai.stats.requests == 12
    assert fake_openai.stats.connections == 4


async def test_a_chunked_answer_is_read_whole_and_its_connection_reused(
    fake_openai: FakeOpenAIServer,
) -> None:
    client = PolicyClient()
    try:
        assert await content(client, chat(fake_openai), "What is 6 * 7? [[chunked]]")
        assert await content(client, chat(fake_openai), "[[chunked]] What is 2 + 2?")
        assert await content(client, chat(fake_openai), "What is 3 + 3?") == "6"
    finally:
        await client.aclose()
    assert fake_openai.stats.connections == 1


async def test_the_chunked_answer_is_the_whole_answer(
    fake_openai: FakeOpenAIServer,
) -> None:
    client = PolicyClient()
    try:
        text = await content(client, chat(fake_openai), "[[chunked]] " + "word " * 50)
    finally:
        await client.aclose()
    assert text == " ".join(["word"] * 50)


async def test_a_server_closing_mid_answer_is_a_transient_error_and_not_reused(
    fake_openai: FakeOpenAIServer,
) -> None:
    client = PolicyClient()
    try:
        assert await content(client, chat(fake_openai), "What is 1 + 1?") == "2"
        with pytest.raises(TargetError) as caught:
            await content(client, chat(fake_openai), "What is 2 + 1? [[cut]]")
        assert await content(client, chat(fake_openai), "What is 3 + 1?") == "4"
    finally:
        await client.aclose()
    error = caught.value
    assert (error.kind, error.error_type) == (ErrorKind.TRANSIENT, "ClientPayloadError")
    assert str(error) == "ClientPayloadError: Response payload is not completed"
    assert fake_openai.stats.connections == 2


async def test_an_answer_saying_connection_close_is_read_then_not_reused(
    fake_openai: FakeOpenAIServer,
) -> None:
    client = PolicyClient()
    try:
        assert await content(client, chat(fake_openai), "What is 5 + 1? [[close]]")
        assert await content(client, chat(fake_openai), "What is 5 + 2?") == "7"
    finally:
        await client.aclose()
    assert fake_openai.stats.connections == 2


async def test_an_answer_over_the_limit_is_refused_and_its_connection_closed(
    fake_openai: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(keepalive, "MAX_ANSWER_BYTES", 4096)
    client = PolicyClient()
    try:
        answer = await client.send(
            "POST", chat(fake_openai), headers=HEADERS, body=ask("[[big:4000]]")
        )
        assert len(answer.content) == 4000
        with pytest.raises(TargetError) as caught:
            await client.send(
                "POST", chat(fake_openai), headers=HEADERS, body=ask("[[big:5000]]")
            )
        assert await content(client, chat(fake_openai), "What is 8 + 1?") == "9"
    finally:
        await client.aclose()
    error = caught.value
    assert (error.kind, error.error_type) == (ErrorKind.PERMANENT, "AnswerTooLarge")
    assert "over 4,096 bytes" in str(error)
    assert fake_openai.stats.connections == 2


async def test_a_silent_server_is_a_read_timeout(fake_openai: FakeOpenAIServer) -> None:
    pool = Pool(LOOPBACK, connect_timeout=5, read_timeout=0.2, setup_timeout=5)
    url = chat(fake_openai)
    head = b"POST %s HTTP/1.1\r\nHost: x\r\n%s" % (url.raw_path, header_lines(()))
    body = json.dumps(ask("What is 1 + 1? [[hang]]")).encode()
    try:
        with pytest.raises(CallError) as caught:
            await pool.request(("http", "127.0.0.1", fake_openai.port), head, body)
    finally:
        await pool.aclose()
    assert caught.value.error_type == "SocketTimeoutError"
    assert not pool.busy and not pool.idle


async def test_a_call_cancelled_by_the_attempt_timeout_closes_its_connection(
    fake_openai: FakeOpenAIServer,
) -> None:
    client = PolicyClient()
    try:
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.3):
                await content(client, chat(fake_openai), "What is 1 + 1? [[hang]]")
        # The server sees its client go away (it counts it when it does).
        for _ in range(200):
            if fake_openai.stats.disconnects:
                break
            await asyncio.sleep(0.05)
        assert fake_openai.stats.disconnects == 1
        assert await content(client, chat(fake_openai), "What is 1 + 2?") == "3"
    finally:
        await client.aclose()
    assert fake_openai.stats.connections == 2


class _UntilClose(BaseHTTPRequestHandler):
    """HTTP/1.0: an answer with no length, ended by closing the connection."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b'{"choices": [{"message": {"content": "all of it"}}]}')

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def until_close() -> Iterator[str]:
    with serve(_UntilClose) as base_url:
        yield base_url


async def test_an_answer_without_a_length_ends_when_the_server_closes(
    until_close: str,
) -> None:
    client = PolicyClient()
    url = httpx.URL(f"{until_close}/chat/completions")
    try:
        assert await content(client, url, "q") == "all of it"
        assert await content(client, url, "q") == "all of it"
    finally:
        await client.aclose()


async def test_a_private_address_is_refused_before_any_connection(
    fake_openai: FakeOpenAIServer, settings
) -> None:
    settings.EVALSITE_TARGET_ALLOW = ["public"]
    client = PolicyClient()
    try:
        with pytest.raises(TargetError) as private:
            await content(client, httpx.URL("http://10.1.2.3:9/v1/chat"), "q")
        with pytest.raises(TargetError) as loopback:
            await content(client, chat(fake_openai), "q")
    finally:
        await client.aclose()
    for caught in (private, loopback):
        assert (caught.value.kind, caught.value.error_type) == (
            ErrorKind.PERMANENT,
            "NetworkPolicy",
        )
    assert "refuses connections to 10.1.2.3" in str(private.value)
    assert fake_openai.stats.connections == 0


async def test_a_denied_name_is_refused_on_its_resolved_address(
    fake_openai: FakeOpenAIServer,
) -> None:
    pool = Pool(
        NetworkPolicy.parse(["loopback", "localhost"], ["127.0.0.0/8", "::1"]),
        connect_timeout=5,
        read_timeout=5,
        setup_timeout=5,
    )
    try:
        with pytest.raises(PolicyRefused, match="localhost"):
            await pool.request(("http", "localhost", fake_openai.port), b"", None)
    finally:
        await pool.aclose()
    assert fake_openai.stats.connections == 0


def test_a_header_that_would_start_another_is_refused() -> None:
    with pytest.raises(ValueError):
        header_lines([(b"X-Trace", b"a\r\nX-Injected: 1")])
    with pytest.raises(ValueError):
        header_lines([(b"X Trace", b"a")])


def test_defaults_are_sent_unless_replaced() -> None:
    lines = header_lines([(b"accept", b"application/json"), (b"X-A", b"1")])
    assert lines.count(b"ccept:") == 1
    assert b"accept: application/json\r\n" in lines
    assert b"Accept-Encoding: gzip, deflate\r\n" in lines
    assert lines.endswith(b"X-A: 1\r\n")


class _Twice(BaseHTTPRequestHandler):
    """Keeps the connection alive and answers every request twice."""

    protocol_version = "HTTP/1.1"
    calls = 0

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        type(self).calls += 1
        body = json.dumps(
            {"choices": [{"message": {"content": f"call {type(self).calls}"}}]}
        ).encode()
        head = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body)
        self.wfile.write((head + body) * 2)
        self.wfile.flush()

    def log_message(self, format: str, *args: object) -> None:
        pass


async def test_an_answer_nothing_asked_for_is_never_taken_for_the_next_one() -> None:
    _Twice.calls = 0  # counted afresh on each loop
    client = PolicyClient()
    with serve(_Twice) as base_url:
        url = httpx.URL(f"{base_url}/chat/completions")
        try:
            first = await content(client, url, "q")
            # The second copy closes the idle connection when it arrives.
            for _ in range(500):
                if client.pool is not None and not any(client.pool.idle.values()):
                    break
                await asyncio.sleep(0.01)
            assert client.pool is not None and not any(client.pool.idle.values())
            second = await content(client, url, "q")
        finally:
            await client.aclose()
    assert (first, second) == ("call 1", "call 2")
