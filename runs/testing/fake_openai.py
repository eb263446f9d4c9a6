"""A real local HTTP server that speaks the OpenAI chat-completions protocol.

It stands in for a model endpoint in tests and benchmarks, and can be told to
misbehave, per request through markers in the prompt (``PROMPT_MARKERS``) or
for all requests through a fault mix (``FaultMix``, the command-line options),
both in ``fake_faults.py``. Otherwise it answers arithmetic ("What is 12 * 7?"
gets "84") and echoes anything else, except a request to grade, which it
judges (``fake_judge.judge_reply``): a judge model that tests can rely on.

Run it alone with ``python -m runs.testing.fake_openai --port 8765``;
``--help`` lists every option and marker.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import sys
import textwrap
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from runs.scripted.agent import (
    AGENT_MARKERS,
    MARKER,
    agent_reply,
    wants_agent,
)
from runs.testing.fake_embeddings import embeddings_answer
from runs.testing.fake_faults import PROMPT_MARKERS, FaultMix, marked_fault
from runs.testing.fake_judge import GRADING, format_refusal, judge_content
from runs.testing.fake_wire import REASONS, WIRE_MARKERS, Closing, wired
from runs.testing.key_forms import FORMS, echoed

# JSON asked for: {"answer": ...}, or to grade, an object matching the schema.
JSON_FORMATS = frozenset({"json_object", "json_schema"})
# The response_format types a server takes unless told otherwise.
ALL_FORMATS = frozenset({"text", *JSON_FORMATS})
# The markers that change how an answer is sent (fake_wire.py).
WIRES = frozenset(m.strip("[]").split(":")[0] for m in WIRE_MARKERS)


@dataclass
class Stats:
    requests: int = 0
    statuses: Counter[int] = field(default_factory=Counter)
    disconnects: int = 0  # clients that closed before their answer was sent
    in_flight: int = 0
    max_in_flight: int = 0
    prompts: Counter[str] = field(default_factory=Counter)
    authorization: set[str] = field(default_factory=set)
    last_request: dict[str, Any] | None = None  # the body, as JSON
    # When each request arrived (time.monotonic()), to measure a rate.
    arrivals: list[float] = field(default_factory=list)
    connections: int = 0  # accepted: a client that keeps them alive opens few


class FakeOpenAIServer:
    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        latency_ms: float = 0.0,
        faults: FaultMix | None = None,
        seed: int | None = None,
        one_at_a_time: bool = False,
        agent: bool = False,
        response_formats: frozenset[str] = ALL_FORMATS,
        prose_judge: bool = False,
    ) -> None:
        self.host = host
        # The response_format types it takes (another gets a 400), and
        # whether it judges as a small model: prose unless held to a schema.
        self.response_formats = response_formats
        self.prose_judge = prose_judge
        self.port = port
        self.latency_ms = latency_ms
        # Answer one request at a time, as a local model server with one slot
        # does: the others wait in turn, each for the latency of those ahead.
        self.one_at_a_time = one_at_a_time
        self.turn = asyncio.Lock()
        # Answer a request with tools as an agent's model (runs/scripted/agent.py).
        self.agent = agent
        self.faults = faults or FaultMix()
        self.random = random.Random(seed)
        self.stats = Stats()
        self.lock = threading.Lock()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.server: asyncio.Server | None = None
        self.thread: threading.Thread | None = None
        self.started = threading.Event()

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    # -- lifecycle -------------------------------------------------------------

    def start(self) -> None:
        self.thread = threading.Thread(
            target=self._serve, name="fake-openai", daemon=True
        )
        self.thread.start()
        if not self.started.wait(10):
            raise RuntimeError("fake OpenAI server did not start")

    def _serve(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.server = self.loop.run_until_complete(
            asyncio.start_server(self.handle, self.host, self.port, backlog=1024)
        )
        self.port = self.server.sockets[0].getsockname()[1]
        self.started.set()
        self.loop.run_forever()
        self.loop.close()

    def stop(self) -> None:
        if self.loop is None or self.server is None:
            return

        async def shutdown() -> None:
            assert self.server is not None
            self.server.close()
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()

        asyncio.run_coroutine_threadsafe(shutdown(), self.loop).result(5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        if self.thread is not None:
            self.thread.join(5)

    async def serve_forever(
        self, on_listening: Callable[[], None] | None = None
    ) -> None:
        """Serve on the current loop (command-line use).

        ``on_listening`` is called once the socket is bound, never before: an
        address announced before the bind could be someone else's server.
        An address in use raises ``OSError`` before anything is announced.
        """
        self.server = await asyncio.start_server(
            self.handle, self.host, self.port, backlog=4096
        )
        self.port = self.server.sockets[0].getsockname()[1]
        if on_listening is not None:
            on_listening()
        async with self.server:
            await self.server.serve_forever()

    # -- HTTP --------------------------------------------------------------------

    async def handle(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.stats.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                headers = {}
                for line in lines[1:]:
                    if ":" in line:
                        name, value = line.split(":", 1)
                        headers[name.strip().lower()] = value.strip()
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                if "authorization" in headers:
                    self.stats.authorization.add(headers["authorization"])
                key = headers.get("authorization", "").removeprefix("Bearer ")
                response = await self.respond(method, path, body, reader, key)
                if response is None:  # the client went away while we waited
                    self.stats.disconnects += 1
                    return
                writer.write(response)
                await writer.drain()
                if isinstance(response, Closing):
                    return
                if headers.get("connection", "").lower() == "close":
                    return
        except (
            asyncio.IncompleteReadError,
            ConnectionError,
            asyncio.LimitOverrunError,
        ):
            return
        except asyncio.CancelledError:
            return
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def respond(
        self,
        method: str,
        path: str,
        body: bytes,
        reader: asyncio.StreamReader,
        key: str = "",
    ) -> bytes | None:
        if method == "POST" and path.rstrip("/").endswith("/embeddings"):
            self.stats.requests += 1
            try:
                return self.http(*embeddings_answer(json.loads(body)))
            except ValueError:
                return self.http(400, {"error": {"message": "bad request body"}})
        if method != "POST" or not path.rstrip("/").endswith("/chat/completions"):
            if method == "GET" and path.rstrip("/").endswith("/stats"):
                return self.http(200, self.counters())
            return self.http(404, {"error": {"message": f"no route {method} {path}"}})
        try:
            request = json.loads(body)
            prompt = str(request["messages"][-1]["content"])
        except (ValueError, KeyError, IndexError, TypeError):
            return self.http(400, {"error": {"message": "bad request body"}})
        self.stats.requests += 1
        self.stats.arrivals.append(time.monotonic())
        self.stats.last_request = request
        self.stats.prompts[prompt] += 1
        self.stats.in_flight += 1
        self.stats.max_in_flight = max(self.stats.max_in_flight, self.stats.in_flight)
        try:
            answer = await self.answer(request, prompt, reader, key)
            wire = {m[1]: m[2] for m in MARKER.finditer(prompt) if m[1] in WIRES}
            return wired(answer, wire) if wire and answer is not None else answer
        finally:
            self.stats.in_flight -= 1

    def counters(self) -> dict[str, int]:
        """What ``GET <base>/v1/stats`` answers: a server in another process
        can be asked how many calls it received."""
        return {
            "requests": self.stats.requests,
            "disconnects": self.stats.disconnects,
            "in_flight": self.stats.in_flight,
            "max_in_flight": self.stats.max_in_flight,
        }

    async def answer(
        self,
        request: dict[str, Any],
        prompt: str,
        reader: asyncio.StreamReader,
        key: str = "",
    ) -> bytes | None:
        from runs.targets.demo import solve  # after Django is set up (see main)

        markers = {m.group(1): m.group(2) for m in MARKER.finditer(prompt)}
        latency = float(markers.get("latency") or self.latency_ms)
        hang = "hang" in markers or self.random.random() < self.faults.hang
        if hang or latency > 0:
            delay = None if hang else latency / 1000
            async with self.turn if self.one_at_a_time else contextlib.nullcontext():
                if not await self.wait_unless_closed(reader, delay):
                    return None
        clean = MARKER.sub("", prompt).strip()
        form = (markers["echo_key"] or "exact") if "echo_key" in markers else None
        if form is not None and form not in FORMS:
            return self.http(400, {"error": {"message": f"no key form {form!r}"}})
        # The unicode form is the key itself, written as \uXXXX in the body.
        echo = "" if form is None else key if form == "unicode" else echoed(key, form)
        escape = key if form == "unicode" else ""
        fault = marked_fault(
            markers,
            seen=self.stats.prompts[prompt],
            draw=self.random.random,
            mix=self.faults,
            http=self.http,
            echo=echo,
            escape=escape,
        )
        if fault is not None:
            return fault
        refusal = format_refusal(request.get("response_format"), self.response_formats)
        if refusal is not None:
            return self.http(400, refusal)
        if "badjson" in markers:
            return self.raw(200, b"{not json", "application/json")
        if "tool" in markers:
            call = self.tool_call(request, clean, markers["tool"], echo)
            return self.http(200, call, escape=escape)
        if wants_agent(request, self.agent):
            reply, asked, said = agent_reply(request, self.stats.requests, solve)
            body = self.completion(request, asked, said)
            body["choices"][0]["message"] = reply
            if reply.get("tool_calls"):
                body["choices"][0]["finish_reason"] = "tool_calls"
            if echo:  # in the model's name, as an echoing proxy would tag it
                body["model"] = f"{body['model']} {echo}"
            return self.http(200, body, escape=escape)
        if "nocontent" in markers:
            body = self.completion(request, clean, "filtered")
            body["choices"][0]["message"]["content"] = None
            body["choices"][0]["finish_reason"] = "content_filter"
            return self.http(200, body)
        if "empty" in markers:
            content = ""
        elif "unparseable" in markers:
            content = "I would rather not say."
        elif any(
            GRADING.search(str(m.get("content", "")))
            for m in request["messages"]
            if isinstance(m, dict)
        ):
            content = judge_content(
                request.get("response_format"),
                MARKER.sub("", prompt),
                prose=self.prose_judge,
            )
        else:
            content = solve(clean) or clean
            if "wrong" in markers:
                content = content + "1"
        response_format = request.get("response_format")
        if (
            isinstance(response_format, dict)
            and response_format.get("type") in JSON_FORMATS
            and not content.startswith("{")
        ):
            content = json.dumps({"answer": content})
        if echo:
            content = f"{content} (your key: {echo})"
        completion = self.completion(request, clean, content)
        if echo:
            completion["model"] = f"{completion['model']} {echo}"
        return self.http(200, completion, escape=escape)

    def tool_call(
        self, request: dict[str, Any], prompt: str, name: str | None, echo: str = ""
    ) -> dict[str, Any]:
        tools = request.get("tools") or [{"function": {"name": "search"}}]
        name = name or tools[0]["function"]["name"]
        completion = self.completion(request, prompt, "")
        completion["choices"][0]["message"] = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": f"call_{self.stats.requests}",
                    "type": "function",
                    "function": {
                        "name": name,
                        "arguments": json.dumps(
                            {"query": prompt, **({"key": echo} if echo else {})}
                        ),
                    },
                }
            ],
        }
        completion["choices"][0]["finish_reason"] = "tool_calls"
        return completion

    async def wait_unless_closed(
        self, reader: asyncio.StreamReader, delay: float | None
    ) -> bool:
        """Sleep ``delay`` seconds (None: forever); False if the client closed first."""
        closed = asyncio.ensure_future(reader.read(1))
        try:
            done, _ = await asyncio.wait({closed}, timeout=delay)
        finally:
            if not closed.done():
                closed.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await closed
        return not done

    @staticmethod
    def completion(
        request: dict[str, Any], prompt: str, content: str
    ) -> dict[str, Any]:
        return {
            "id": f"chatcmpl-{time.monotonic_ns()}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request.get("model", "fake"),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": "stop",
                }
            ],
            "usage": {
                "prompt_tokens": len(prompt.split()),
                "completion_tokens": len(content.split()),
                "total_tokens": len(prompt.split()) + len(content.split()),
            },
        }

    def http(
        self,
        status: int,
        payload: Any,
        headers: dict[str, str] | None = None,
        escape: str = "",
    ) -> bytes:
        text = json.dumps(payload)
        if escape:  # every character of it as \uXXXX, as JSON allows
            text = text.replace(escape, echoed(escape, "unicode"))
        return self.raw(status, text.encode(), "application/json", headers)

    def raw(
        self,
        status: int,
        body: bytes,
        content_type: str,
        headers: dict[str, str] | None = None,
    ) -> bytes:
        self.stats.statuses[status] += 1
        lines = [
            f"HTTP/1.1 {status} {REASONS.get(status, 'Status')}",
            f"Content-Type: {content_type}",
            f"Content-Length: {len(body)}",
            *(f"{k}: {v}" for k, v in (headers or {}).items()),
            "",
            "",
        ]
        return "\r\n".join(lines).encode() + body


def build_parser() -> argparse.ArgumentParser:
    markers = "\n".join(
        textwrap.fill(
            meaning,
            width=79,
            initial_indent=f"  {marker:<18}",
            subsequent_indent=" " * 20,
        )
        for marker, meaning in {
            **PROMPT_MARKERS,
            **AGENT_MARKERS,
            **WIRE_MARKERS,
        }.items()
    )
    description = textwrap.fill(
        "A local stand-in for an OpenAI-compatible model endpoint. It serves "
        "POST <base>/v1/chat/completions (any path ending in /chat/completions), "
        "POST <base>/v1/embeddings (deterministic bag-of-words vectors) "
        "and GET <base>/v1/stats (its counters of calls, as JSON; any path ending "
        "in /stats); other routes answer 404. It accepts any API key, answers "
        'two-number arithmetic in the last message ("What is 12 * 7?" gets '
        '"84"), judges a request that asks to grade (the text after a line '
        '"Answer:" against '
        'the one after "Reference answer:"; the verdict as the prompt asks: '
        '"Verdict: PASS" or "FAIL", a 1 to 5 or 0 to 10 score, or JSON) and '
        "echoes anything else. The options make every request misbehave at "
        "random; markers in a prompt make that request misbehave.",
        width=79,
    )
    parser = argparse.ArgumentParser(
        prog="python -m runs.testing.fake_openai",
        description=description,
        epilog="prompt markers (in the last message; several may be combined, "
        "and they are\nremoved from the prompt before it is answered):\n" + markers,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default %(default)s)"
    )
    parser.add_argument(
        "--port",
        type=int,
        default=8765,
        help="port to listen on; 0 picks a free one (default %(default)s)",
    )
    parser.add_argument(
        "--latency-ms",
        type=float,
        default=0.0,
        help="wait this many milliseconds before every answer (default 0; "
        "[[latency:MS]] overrides it per request)",
    )
    parser.add_argument(
        "--one-at-a-time",
        action="store_true",
        help="answer one request at a time: the others wait their turn, so "
        "latency grows with the calls in flight (as a local model server with "
        "one slot)",
    )
    parser.add_argument(
        "--response-formats",
        default=",".join(sorted(ALL_FORMATS)),
        help="response_format types taken; others get a 400 (default %(default)s)",
    )
    parser.add_argument(
        "--prose-judge",
        action="store_true",
        help="judge in prose with no verdict unless held to a JSON schema",
    )
    parser.add_argument(
        "--error-500",
        type=float,
        default=0.0,
        metavar="P",
        help="probability (0-1) that a request gets a 500 (default 0)",
    )
    parser.add_argument(
        "--error-429",
        type=float,
        default=0.0,
        metavar="P",
        help="probability (0-1) that a request gets a 429 with a Retry-After "
        "header (default 0)",
    )
    parser.add_argument(
        "--retry-after",
        default="1",
        metavar="SECONDS",
        help="the Retry-After value sent with --error-429 answers "
        "(default %(default)s)",
    )
    parser.add_argument(
        "--hang",
        type=float,
        default=0.0,
        metavar="P",
        help="probability (0-1) that a request is never answered (default 0)",
    )
    parser.add_argument(
        "--malformed",
        type=float,
        default=0.0,
        metavar="P",
        help="probability (0-1) that a request gets a 200 without choices (default 0)",
    )
    parser.add_argument(
        "--agent",
        action="store_true",
        help="answer every request that has tools as an agent's model: tool "
        "calls chosen from the task, then a final answer (see the agent markers)",
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=None,
        help="seed of the random fault mix, for repeatable runs (default: random)",
    )
    return parser


def main() -> None:
    import os

    import django

    args = build_parser().parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")
    django.setup()  # for the demo model's arithmetic
    faults = FaultMix(
        error_500=args.error_500,
        error_429=args.error_429,
        retry_after=args.retry_after,
        hang=args.hang,
        malformed=args.malformed,
    )
    server = FakeOpenAIServer(
        host=args.host,
        port=args.port,
        latency_ms=args.latency_ms,
        faults=faults,
        seed=args.seed,
        one_at_a_time=args.one_at_a_time,
        agent=args.agent,
        response_formats=frozenset(
            kind.strip() for kind in args.response_formats.split(",") if kind.strip()
        ),
        prose_judge=args.prose_judge,
    )

    def announce() -> None:
        print(f"fake OpenAI endpoint on {server.base_url}", flush=True)

    try:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(server.serve_forever(announce))
    except OSError as exc:
        sys.exit(
            f"fake OpenAI endpoint: cannot listen on {args.host}:{args.port}: "
            f"{exc.strerror or exc} (choose another --port, or 0 for a free one)"
        )


if __name__ == "__main__":
    main()
