"""Large request bodies are refused by size before they are read."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import override_settings

from evalsite.asgi import application
from runs.models import Dataset, Project
from runs.projects.services import api_key_create
from tests.processes import ROOT, env_for, free_port

MB = 1024 * 1024
UPLOAD = "/api/v1/datasets/upload"
BOUNDARY = "testboundary"
DAPHNE = [sys.executable, "-m", "daphne", "-b", "127.0.0.1"]


class Exchange:
    """Drives the ASGI application with a body fed in chunks, recording reads."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks
        self.reads = 0
        self.sent: list[dict[str, Any]] = []

    async def receive(self) -> dict[str, Any]:
        if self.reads >= len(self.chunks):
            await asyncio.Event().wait()  # the client stays connected
        chunk = self.chunks[self.reads]
        self.reads += 1
        more = self.reads < len(self.chunks)
        return {"type": "http.request", "body": chunk, "more_body": more}

    async def send(self, message: dict[str, Any]) -> None:
        self.sent.append(message)

    @property
    def status(self) -> int:
        return self.sent[0]["status"]

    @property
    def headers(self) -> dict[bytes, bytes]:
        return dict(self.sent[0]["headers"])

    @property
    def body(self) -> bytes:
        return b"".join(m.get("body", b"") for m in self.sent[1:])


async def post(
    path: str,
    chunks: list[bytes],
    *,
    length: int | None,
    headers: list[tuple[bytes, bytes]] = (),
    chunked: bool = True,
    content_type: bytes = f"multipart/form-data; boundary={BOUNDARY}".encode(),
) -> Exchange:
    """POST ``chunks``: with a Content-Length, or without one, framed as chunked
    or (``chunked=False``) not at all, as HTTP/2 allows."""
    head = [(b"host", b"testserver")]
    if length is not None:
        head.append((b"content-length", str(length).encode()))
    elif chunked:
        head.append((b"transfer-encoding", b"chunked"))
    head.append((b"content-type", content_type))
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": head + list(headers),
        "client": ("127.0.0.1", 50000),
        "server": ("testserver", 80),
    }
    exchange = Exchange(chunks)
    await application(scope, exchange.receive, exchange.send)
    return exchange


def multipart(project: int, content: bytes) -> bytes:
    return (
        (
            f"--{BOUNDARY}\r\n"
            'Content-Disposition: form-data; name="project"\r\n\r\n'
            f"{project}\r\n--{BOUNDARY}\r\n"
            'Content-Disposition: form-data; name="file"; filename="d.jsonl"\r\n'
            "Content-Type: application/octet-stream\r\n\r\n"
        ).encode()
        + content
        + f"\r\n--{BOUNDARY}--\r\n".encode()
    )


async def test_anonymous_large_api_post_gets_413_json_before_its_body_is_read() -> None:
    exchange = await post(UPLOAD, [b"x" * MB] * 200, length=200 * MB)

    assert exchange.status == 413
    assert exchange.reads == 0
    assert exchange.headers[b"content-type"] == b"application/json"
    assert "API key" in json.loads(exchange.body)["detail"]


async def test_anonymous_large_page_post_gets_a_413_page_before_its_body_is_read() -> (
    None
):
    exchange = await post("/datasets/upload/", [b"x" * MB] * 200, length=200 * MB)

    assert exchange.status == 413
    assert exchange.reads == 0
    assert exchange.headers[b"content-type"].startswith(b"text/html")


async def test_anonymous_chunked_body_is_cut_at_the_limit() -> None:
    exchange = await post(UPLOAD, [b"x" * (256 * 1024)] * 800, length=None)

    assert exchange.status == 413
    assert exchange.reads <= 5  # 1 MB anonymous limit, 256 KB chunks


async def test_anonymous_body_without_any_length_header_is_cut_at_the_limit() -> None:
    # HTTP/2 needs neither Content-Length nor chunked framing for a body.
    exchange = await post(UPLOAD, [b"x" * (256 * 1024)] * 8, length=None, chunked=False)

    assert exchange.status == 413
    assert exchange.reads <= 5  # 1 MB anonymous limit, 256 KB chunks
    assert "API key" in json.loads(exchange.body)["detail"]


@pytest.mark.django_db(transaction=True)
async def test_made_up_key_does_not_lift_the_anonymous_limit_of_a_chunked_body() -> (
    None
):
    exchange = await post(
        UPLOAD,
        [b"x" * (256 * 1024)] * 8,
        length=None,
        headers=[(b"authorization", b"Bearer made-up-key")],
    )

    assert exchange.status == 413
    assert exchange.reads <= 5
    assert "API key" in json.loads(exchange.body)["detail"]


@pytest.mark.django_db(transaction=True)
async def test_key_holder_streams_a_body_without_a_length_over_the_anonymous_limit(
    alice: User, project: Project
) -> None:
    _, plain = await _key(alice)
    items = [{"id": str(n), "input": "a" * 200, "expected": "a"} for n in range(6000)]
    body = json.dumps({"project": project.pk, "name": "d", "items": items}).encode()
    assert len(body) > MB

    exchange = await post(
        "/api/v1/datasets",
        [body[i : i + 64 * 1024] for i in range(0, len(body), 64 * 1024)],
        length=None,
        headers=[(b"authorization", f"Bearer {plain}".encode())],
        content_type=b"application/json",
    )

    assert exchange.status == 201, exchange.body
    assert await Dataset.objects.filter(item_count=6000).aexists()


@pytest.mark.django_db(transaction=True)
async def test_body_over_the_limit_gets_413_even_with_a_valid_key(alice: User) -> None:
    _, plain = await _key(alice)

    with override_settings(EVALSITE_MAX_REQUEST_BYTES=10 * MB):
        exchange = await post(
            UPLOAD,
            [b"x" * MB] * 11,
            length=11 * MB,
            headers=[(b"authorization", f"Bearer {plain}".encode())],
        )

    assert exchange.status == 413
    assert exchange.reads == 0


@pytest.mark.django_db(transaction=True)
async def test_forged_session_cookie_does_not_lift_the_anonymous_limit() -> None:
    exchange = await post(
        UPLOAD,
        [b"x" * MB] * 2,
        length=2 * MB,
        headers=[(b"cookie", b"sessionid=not-a-session")],
    )

    assert exchange.status == 413
    assert exchange.reads == 0


@pytest.mark.django_db(transaction=True)
async def test_made_up_key_does_not_lift_the_anonymous_limit() -> None:
    exchange = await post(
        UPLOAD,
        [b"x" * MB] * 2,
        length=2 * MB,
        headers=[(b"authorization", b"Bearer made-up-key")],
    )

    assert exchange.status == 413
    assert exchange.reads == 0


@pytest.mark.django_db(transaction=True)
async def test_key_holder_uploads_a_body_over_the_anonymous_limit(
    alice: User, project: Project
) -> None:
    _, plain = await _key(alice)
    line = json.dumps({"id": "x", "input": "a" * 200, "expected": "a"}).encode() + b"\n"
    content = b"".join(
        line.replace(b'"x"', f'"{i}"'.encode()) for i in range(6000)
    )  # about 1.3 MB
    body = multipart(project.pk, content)
    assert len(body) > MB

    exchange = await post(
        UPLOAD,
        [body[i : i + 64 * 1024] for i in range(0, len(body), 64 * 1024)],
        length=len(body),
        headers=[(b"authorization", f"Bearer {plain}".encode())],
    )

    assert exchange.status == 201, exchange.body
    assert await Dataset.objects.filter(item_count=6000).aexists()


async def _key(user: User) -> tuple[Any, str]:
    from asgiref.sync import sync_to_async

    return await sync_to_async(api_key_create)(user=user, name="ci")


# -- under Daphne ------------------------------------------------------------------


@pytest.fixture
def daphne(data_dir: Path) -> Iterator[int]:
    with _daphne(env_for(data_dir)) as port:
        yield port


@pytest.fixture
def daphne_1k_anonymous(data_dir: Path) -> Iterator[int]:
    """Daphne with the smallest anonymous limit: a body over it fits one read."""
    env = env_for(data_dir) | {"EVALSITE_MAX_ANONYMOUS_REQUEST_BYTES": "1024"}
    with _daphne(env) as port:
        yield port


@contextlib.contextmanager
def _daphne(env: dict[str, str]) -> Iterator[int]:
    port = free_port()
    server = subprocess.Popen(
        [*DAPHNE, "-p", str(port), "evalsite.asgi:application"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "daphne did not start"
                time.sleep(0.1)
        yield port
    finally:
        server.terminate()
        server.wait(10)


def test_daphne_answers_413_from_the_headers_without_waiting_for_the_body(
    daphne: int,
) -> None:
    with socket.create_connection(("127.0.0.1", daphne), timeout=20) as sock:
        sock.sendall(
            f"POST {UPLOAD} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Content-Type: multipart/form-data; boundary={BOUNDARY}\r\n"
            f"Content-Length: {200 * MB}\r\n\r\n".encode()
            + b"x" * 1000  # and not one byte more
        )
        answer = sock.recv(65536)

    assert answer.startswith(b"HTTP/1.1 413")
    assert b"application/json" in answer


def test_daphne_refusal_from_the_headers_is_the_only_answer_to_expect_continue(
    daphne: int,
) -> None:
    with socket.create_connection(("127.0.0.1", daphne), timeout=20) as sock:
        sock.sendall(
            f"POST {UPLOAD} HTTP/1.1\r\nHost: 127.0.0.1\r\nExpect: 100-continue\r\n"
            f"Content-Type: multipart/form-data; boundary={BOUNDARY}\r\n"
            f"Content-Length: {200 * MB}\r\n\r\n".encode()
        )
        answer = _answer(sock, "a 413 in place of 100 Continue")

    assert answer.startswith(b"HTTP/1.1 413")
    assert b"100 Continue" not in answer
    assert answer.endswith(b"}")  # the JSON body, and nothing after it


@pytest.mark.parametrize(
    "credential",
    [b"Authorization: Bearer made-up-key", b"Cookie: sessionid=made-up-session"],
    ids=["key", "session"],
)
def test_daphne_refuses_made_up_credentials_without_waiting_for_the_body(
    daphne: int, credential: bytes
) -> None:
    with socket.create_connection(("127.0.0.1", daphne), timeout=20) as sock:
        sock.sendall(
            f"POST {UPLOAD} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Content-Type: multipart/form-data; boundary={BOUNDARY}\r\n"
            f"Content-Length: {2 * MB}\r\n".encode()
            + credential
            + b"\r\n\r\n"
            + b"x" * 1000  # and not one byte more
        )
        answer = _answer(sock, "a 413 before the rest of the body")

    assert answer.startswith(b"HTTP/1.1 413")
    assert b"API key" in answer


KEY_HOLDER = """
from django.contrib.auth import get_user_model
from runs.projects.services import api_key_create, project_create
user = get_user_model().objects.get(username="researcher")
project = project_create(name="Uploads", owner=user)
print(project.pk, api_key_create(user=user, name="ci")[1])
"""


@pytest.mark.parametrize("chunked", [False, True], ids=["length", "chunked"])
def test_daphne_reads_a_large_body_once_the_key_is_checked(
    data_dir: Path, daphne: int, chunked: bool
) -> None:
    project, key = _key_holder(data_dir)
    items = [{"id": str(n), "input": "a" * 200, "expected": "a"} for n in range(6000)]
    if chunked:  # Django reads no multipart body without a length: JSON items
        path, content_type = "/api/v1/datasets", "application/json"
        body = json.dumps({"project": int(project), "name": "d", "items": items})
        data = body.encode()
        pieces = [data[i : i + 100_000] for i in range(0, len(data), 100_000)]
        data = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n"
        framing = "Transfer-Encoding: chunked"
    else:
        path, content_type = UPLOAD, f"multipart/form-data; boundary={BOUNDARY}"
        lines = b"".join(json.dumps(item).encode() + b"\n" for item in items)
        data = multipart(int(project), lines)
        framing = f"Content-Length: {len(data)}"
    assert len(data) > MB  # over the anonymous limit

    with socket.create_connection(("127.0.0.1", daphne), timeout=60) as sock:
        sock.sendall(
            f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
            f"Content-Type: {content_type}\r\nAuthorization: Bearer {key}\r\n"
            f"{framing}\r\n\r\n".encode()
            + data
        )
        answer = _answer(sock, "the answer to an upload with a real key")

    assert answer.startswith(b"HTTP/1.1 201"), answer[-800:]
    assert b'"item_count": 6000' in answer


def test_daphne_handles_a_body_that_came_whole_while_the_key_was_checked(
    data_dir: Path, daphne_1k_anonymous: int
) -> None:
    project, key = _key_holder(data_dir)
    items = [{"id": str(n), "input": "question", "expected": "a"} for n in range(200)]
    body = json.dumps({"project": int(project), "name": "d", "items": items})
    assert 1024 < len(body) < 16 * 1024  # over the limit, in the first read

    with socket.create_connection(
        ("127.0.0.1", daphne_1k_anonymous), timeout=60
    ) as sock:
        sock.sendall(
            f"POST /api/v1/datasets HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Connection: close\r\nContent-Type: application/json\r\n"
            f"Authorization: Bearer {key}\r\nContent-Length: {len(body)}\r\n\r\n"
            f"{body}".encode()
        )
        answer = _answer(sock, "the answer to a small body with a real key")

    assert answer.startswith(b"HTTP/1.1 201"), answer[-800:]
    assert b'"item_count": 200' in answer


def _key_holder(data_dir: Path) -> tuple[str, str]:
    """A project and an API key of its owner, made in the server's database."""
    made = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", KEY_HOLDER],
        cwd=ROOT,
        env=env_for(data_dir),
        check=True,
        capture_output=True,
        text=True,
    )
    project, key = made.stdout.splitlines()[-1].split()
    return project, key


def _answer(sock: socket.socket, waiting_for: str) -> bytes:
    """The server's answer: what it sent until it closed the connection."""
    chunks = []
    try:
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    except TimeoutError:
        if not chunks:
            pytest.fail(f"no answer in {sock.gettimeout()} s: waited for {waiting_for}")
    return b"".join(chunks)
