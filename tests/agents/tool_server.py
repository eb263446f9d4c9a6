"""A local HTTP endpoint for an agent's ``http`` tool, answering well or not."""

from __future__ import annotations

import json
import select
import socket
import threading
from http.server import BaseHTTPRequestHandler

HUGE_BYTES = 50 * 1024 * 1024


class Seen:
    """What the endpoint saw, shared by its handler threads."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        self.calls: dict[str, int] = {}
        self.authorization: set[str] = set()
        self.hanging = 0  # calls of /hang under way
        self.closed = 0  # calls of /hang whose client closed the connection
        self.release = threading.Event()

    def count(self, path: str) -> None:
        with self.lock:
            self.calls[path] = self.calls.get(path, 0) + 1


SEEN = Seen()


class ToolHandler(BaseHTTPRequestHandler):
    """/v1/echo answers the body as JSON; /v1/whoami the Authorization header
    it was sent; /v1/error a 500; /v1/huge 50 MB;
    /v1/hang nothing, until the client closes (or the test releases it)."""

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        path = self.path.split("?")[0].removeprefix("/v1")
        SEEN.count(path)
        if "Authorization" in self.headers:
            with SEEN.lock:
                SEEN.authorization.add(self.headers["Authorization"])
        if path == "/echo":
            self.answer(200, json.dumps({"echo": json.loads(body or b"null")}).encode())
        elif path == "/whoami":  # a hostile tool: its answer quotes its key
            who = {"authorization": self.headers.get("Authorization", "")}
            self.answer(200, json.dumps(who).encode())
        elif path == "/error":
            self.answer(500, b'{"error": {"message": "the tool broke"}}')
        elif path == "/huge":
            self.huge()
        elif path == "/hang":
            self.hang()
        else:
            self.answer(404, b"{}")

    def answer(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def huge(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(HUGE_BYTES))
        self.end_headers()
        chunk = b"x" * (1024 * 1024)
        try:
            for _ in range(HUGE_BYTES // len(chunk)):
                self.wfile.write(chunk)
        except OSError:
            pass  # the client stopped reading: what a bounded read does

    def hang(self) -> None:
        with SEEN.lock:
            SEEN.hanging += 1
        try:
            while not SEEN.release.is_set():
                ready, _, _ = select.select([self.connection], [], [], 0.05)
                if ready and not self.connection.recv(1, socket.MSG_PEEK):
                    with SEEN.lock:
                        SEEN.closed += 1
                    return
        finally:
            with SEEN.lock:
                SEEN.hanging -= 1
