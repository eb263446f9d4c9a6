"""A local agent behind HTTP that answers as each request's body tells it.

The body's ``mode`` says what to do (``echo`` by default): answer, fail with a
status, report itself suspended, answer in text or in broken JSON. Every
request is recorded (method, path, headers, body) for the tests to read.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler
from typing import Any, ClassVar


class AgentHandler(BaseHTTPRequestHandler):
    requests: ClassVar[list[dict[str, Any]]] = []
    seen: ClassVar[Counter[str]] = Counter()
    lock = threading.Lock()

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = json.loads(raw) if raw else None
        with self.lock:
            self.requests.append(
                {
                    "method": self.command,
                    "path": self.path,
                    "headers": {k.lower(): v for k, v in self.headers.items()},
                    "body": body,
                }
            )
        mode = str(body.get("mode", "echo")) if isinstance(body, dict) else "echo"
        self.answer(mode, body)

    do_PUT = do_POST
    do_GET = do_POST

    def answer(self, mode: str, body: Any) -> None:
        name, _, argument = mode.partition(":")
        if name == "status":
            code, _, retry_after = argument.partition(":")
            headers = {"Retry-After": retry_after} if retry_after else {}
            self.send(int(code), {"error": {"message": f"simulated {code}"}}, headers)
        elif name == "flaky":  # the first request of this key fails with a 503
            with self.lock:
                self.seen[argument] += 1
                first = self.seen[argument] == 1
            if first:
                self.send(503, {"error": "busy"}, {"Retry-After": "0"})
            else:
                self.send(200, {"status": "done", "result": {"answer": "recovered"}})
        elif name == "suspended":
            self.send(
                200,
                {
                    "status": "waiting_for_input",
                    "question": "Which city did you mean?",
                    "trace": ["search", "ask_user"],
                },
            )
        elif name == "echo_auth":  # an error that quotes the credential it got
            token = self.headers.get("X-Agent-Key") or self.headers.get("Authorization")
            message = f"token {token} is not valid"
            self.send(401, {"error": {"message": message}})
        elif name == "sleep":  # answer after this many seconds
            time.sleep(float(argument))
            self.send(200, {"status": "done"})
        elif name == "wide":  # an answer with many keys, one long and unprintable
            wide = {f"key{i}": i for i in range(100)}
            wide["\x1b[31m" + "k" * 500] = 1
            self.send(200, wide)
        elif name == "echo_headers":  # an answer that quotes the request headers
            headers = {k.lower(): v for k, v in self.headers.items()}
            self.send(200, {"status": "done", "headers": headers})
        elif name == "text":
            self.send_text(200, "plain answer ✓")
        elif name == "badjson":
            self.send_text(200, "{not json", "application/json")
        elif name in TRAJECTORIES:  # an answer with the agent's trajectory
            self.send(
                200, {"status": "done", "answer": "4", "trace": TRAJECTORIES[name]}
            )
        elif name == "null":
            self.send(200, {"status": "done", "result": {"answer": None}})
        else:
            self.send(
                200,
                {
                    "status": "done",
                    "result": {"answer": body, "keys": ["a", "b"]},
                    "choices": [{"message": {"content": "from a list"}}],
                },
            )

    def send(self, status: int, payload: Any, headers: dict[str, str] | None = None):
        self.send_text(status, json.dumps(payload), "application/json", headers)

    def send_text(
        self,
        status: int,
        text: str,
        content_type: str = "text/plain; charset=utf-8",
        headers: dict[str, str] | None = None,
    ) -> None:
        data = text.encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)


# What an agent may report of how it got there, by mode: evalsite's shape,
# OpenAI-style messages, and a step of no known kind.
TRAJECTORIES: dict[str, Any] = {
    "steps": [
        {
            "kind": "model",
            "name": "small-model",
            "output": {"tool_calls": [{"name": "add"}]},
            "prompt_tokens": 20,
            "completion_tokens": 5,
            "cost": 0.001,
            "latency_ms": 12.5,
        },
        {"kind": "tool", "name": "add", "arguments": {"a": 2, "b": 2}, "output": 4},
        {
            "kind": "model",
            "name": "small-model",
            "prompt_tokens": 30,
            "completion_tokens": 2,
        },
    ],
    "messages": [
        {"role": "user", "content": "What is 2+2?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "add", "arguments": '{"a": 2, "b": 2}'},
                },
                {
                    "id": "c2",
                    "type": "function",
                    "function": {"name": "log", "arguments": "{oops"},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "4"},
        {"role": "assistant", "content": "4"},
    ],
    "badsteps": [{"kind": "model", "name": "m"}, {"kind": "thought", "name": "x"}],
}


def fresh_handler() -> type[AgentHandler]:
    """A handler class with its own request log."""
    return type("Agent", (AgentHandler,), {"requests": [], "seen": Counter()})  # type: ignore[return-value]
