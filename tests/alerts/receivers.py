"""A receiver of alerts on loopback, and waits on the deliveries' state."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler

from runs.alerts.dispatch import sender
from tests.local_http import serve


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Receiver:
    """What a receiver got, and how it answers: ``statuses`` one per request
    (then 200), each once ``gate`` is set, an error with ``retry_after``."""

    url: str = ""
    requests: list[Received] = field(default_factory=list)
    statuses: list[int] = field(default_factory=list)
    gate: threading.Event = field(default_factory=threading.Event)
    arrived: threading.Event = field(default_factory=threading.Event)
    retry_after: str = ""


@contextlib.contextmanager
def receiver(
    *, statuses: list[int] | None = None, held: bool = False, retry_after: str = ""
) -> Iterator[Receiver]:
    state = Receiver(statuses=list(statuses or []), retry_after=retry_after)
    if not held:
        state.gate.set()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", 0))
            state.requests.append(
                Received(self.path, dict(self.headers.items()), self.rfile.read(length))
            )
            state.arrived.set()
            state.gate.wait(30)
            status = state.statuses.pop(0) if state.statuses else 200
            self.send_response(status)
            if status >= 400 and state.retry_after:
                self.send_header("Retry-After", state.retry_after)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args: object) -> None:
            pass

    with serve(Handler) as base:
        state.url = base.removesuffix("/v1") + "/hooks/alerts"
        try:
            yield state
        finally:
            state.gate.set()


def closed_port_url() -> str:
    """A loopback URL where nothing listens."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/hooks/alerts"


def wait_for(
    predicate: Callable[[], bool], what: str, *, seconds: float = 30.0
) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"not reached in {seconds:g} s: {what}")
        time.sleep(0.02)


def deliveries_settled() -> None:
    """Every delivery this process started has ended."""
    wait_for(lambda: sender.busy == 0, "the deliveries ended")
