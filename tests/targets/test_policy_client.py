"""The shared HTTP client sends through aiohttp and answers as httpx would:
the body httpx would send, the answer decoded as httpx decodes it."""

from __future__ import annotations

import gzip
import json
import math
import socket
import sys
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import httpx
import pytest

from runs.calls.http_client import PlainAnswer, PolicyClient
from runs.models import ErrorKind
from runs.targets import TargetError
from tests.local_http import serve

CAFE = "café ✓"


class _Answers(BaseHTTPRequestHandler):
    """Answers by path; /echo returns what it got (headers and raw body)."""

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        headers = {"Content-Type": "application/json"}
        if self.path.endswith("/gzip"):
            data = gzip.compress(json.dumps({"text": CAFE}).encode())
            headers["Content-Encoding"] = "gzip"
        elif self.path.endswith("/latin1"):
            data = json.dumps({"text": "café"}, ensure_ascii=False).encode("latin-1")
            headers["Content-Type"] = "application/json; charset=ISO-8859-1"
        elif self.path.endswith("/utf8"):
            data = json.dumps({"text": CAFE}, ensure_ascii=False).encode()
        else:
            data = json.dumps(
                {
                    "body": body.decode(),
                    "content_type": self.headers.get("Content-Type"),
                    "custom": self.headers.get("X-Custom"),
                }
            ).encode()
        self.send_response(200)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def answers() -> Iterator[str]:
    with serve(_Answers) as base_url:
        yield base_url


async def post(url: str, body: object = None, **headers: str) -> httpx.Response:
    client = PolicyClient()
    try:
        return await client.send(
            "POST", httpx.URL(url), headers=httpx.Headers(headers), body=body
        )
    finally:
        await client.aclose()


async def test_the_body_is_what_httpx_sends_for_json(answers: str) -> None:
    body = {"text": CAFE, "n": [1, 2.5, None]}
    response = await post(f"{answers}/echo", body, **{"X-Custom": "yes"})
    got = response.json()
    request = httpx.Request("POST", answers, json=body)
    assert got["body"].encode() == request.read()
    assert (got["content_type"], got["custom"]) == ("application/json", "yes")


async def test_a_declared_content_type_is_kept(answers: str) -> None:
    response = await post(
        f"{answers}/echo", {"a": 1}, **{"Content-Type": "application/vnd.x+json"}
    )
    assert response.json()["content_type"] == "application/vnd.x+json"


async def test_a_nan_in_the_body_is_refused_as_httpx_refuses_it(answers: str) -> None:
    with pytest.raises(ValueError):
        await post(f"{answers}/echo", {"x": math.nan})


@pytest.mark.parametrize(
    ("path", "text"), [("gzip", CAFE), ("latin1", "café"), ("utf8", CAFE)]
)
async def test_the_answer_is_decoded_as_httpx_decodes_it(
    answers: str, path: str, text: str
) -> None:
    response = await post(f"{answers}/{path}", {})
    assert response.status_code == 200
    # The text by the declared charset (UTF-8 without one), as httpx reads it.
    assert json.loads(response.text) == {"text": text}
    expected = httpx.Response(
        200,
        headers=response.headers,
        content=gzip.compress(response.content) if path == "gzip" else response.content,
    )
    assert response.text == expected.text


async def test_a_refused_connection_is_a_transient_target_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed when the block ends: nothing listens
    with pytest.raises(TargetError) as caught:
        await post(f"http://127.0.0.1:{port}/v1/x", {})
    assert caught.value.kind == ErrorKind.TRANSIENT
    assert "Connect" in caught.value.error_type


PLAIN_BODIES = [
    b'{"choices": [{"message": {"content": "caf\xc3\xa9 \xe2\x9c\x93"}}]}',
    b"",
    b"not json \xff\xfe broken utf-8",
    b'"\xef\xbb\xbfa string after a byte order mark"',
    b"[1, 2.5, null, true]",
    # Objects, read by the scanner unless json.loads would read them otherwise:
    b'{"a": [1, {"b": "\\ud83d\\ude00"}], "c": NaN, "d": -Infinity}',
    b'{"a": 1}\n',  # whitespace after it
    b' {"a": 1}',
    b'{"a": 1} {"b": 2}',  # extra data
    b'{"a": ',  # cut short
    b'{"a": "\xff"}',  # not UTF-8
    b'{"a": "\xed\xa0\x80"}',  # a lone surrogate, as json.loads decodes it
    b"\xef\xbb\xbf{}",  # a byte order mark
    '{"a": 1}'.encode("utf-16-le"),
    '{"a": 1}'.encode("utf-32-le"),
    b"{",
    b"{}",
]
PLAIN_TYPES = [
    b"application/json",
    b"application/json; charset=utf-8",
    b'text/plain; charset="UTF-8"',
    b"text/html;charset=utf8; boundary=x",
]


@pytest.mark.parametrize("body", PLAIN_BODIES)
@pytest.mark.parametrize("content_type", PLAIN_TYPES)
def test_a_plain_answer_reads_as_httpx_reads_it(
    body: bytes, content_type: bytes
) -> None:
    raw = (
        (b"Content-Type", content_type),
        (b"Content-Length", str(len(body)).encode()),
        (b"Retry-After", b"7"),
    )
    assert PlainAnswer.fits(raw)
    plain = PlainAnswer(503, raw, body)
    response = httpx.Response(503, headers=raw, content=body)
    if b"charset" not in content_type:
        response.encoding = "utf-8"  # what the client sets without a charset
    assert (plain.status_code, plain.content) == (response.status_code, body)
    assert plain.text == response.text
    assert plain.headers == response.headers
    assert plain.headers.get("retry-after") == "7"
    try:
        expected = response.json()
    except ValueError as exc:
        with pytest.raises(type(exc)):
            plain.json()
    else:
        assert plain.json() == expected


def test_an_answers_json_is_read_without_a_python_call() -> None:
    # json.loads of bytes detects their encoding and decodes in Python, five
    # calls an answer; the scanner reads an object in one C call.
    body = PLAIN_BODIES[0]
    plain = PlainAnswer(200, ((b"Content-Length", str(len(body)).encode()),), body)
    calls: list[str] = []

    def count(frame: Any, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code.co_name != "json":
            calls.append(frame.f_code.co_name)

    sys.setprofile(count)
    try:
        data = plain.json()
    finally:
        sys.setprofile(None)
    assert data == json.loads(body)
    assert calls == ["json_of"]


@pytest.mark.parametrize(
    "header",
    [
        (b"Content-Encoding", b"gzip"),
        (b"Content-Encoding", b"br"),
        (b"Content-Type", b"application/json; charset=ISO-8859-1"),
        (b"Content-Type", b"text/plain; charset=utf-16"),
        (b"Content-Type", b"text/plain; charset"),
        (b"Content-Type", b"text/plain; xcharset=utf-8; charset=latin-1"),
        (b"Content-Type", b'text/plain; name="charset=utf-8"; charset=latin-1'),
    ],
)
def test_an_answer_needing_decoding_is_left_to_httpx(
    header: tuple[bytes, bytes],
) -> None:
    assert not PlainAnswer.fits(((b"Content-Length", b"2"), header))


async def test_headers_made_per_request_are_not_kept_for_each_request(
    answers: str,
) -> None:
    # A target sending trace headers makes new headers for every item: a
    # client that kept each converted set held one per request of the run.
    client = PolicyClient()
    url = httpx.URL(f"{answers}/echo")
    try:
        for n in range(40):
            headers = httpx.Headers({"X-Custom": str(n)})
            response = await client.send("POST", url, headers=headers, body={})
            assert response.json()["custom"] == str(n)
    finally:
        await client.aclose()
    assert len(client.plain_headers) <= 8
    assert len(client.urls) == 1
