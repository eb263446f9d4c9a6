"""What redacting an item's texts costs (``runs.secrets.redaction``).

    python bench/redaction.py

A run's redactor is built from a 164-character project key (the target's,
the length of an OpenAI project key) and a 51-character judge key. For an
answer of about 2 KB and one of about 1 MB (a chat completion: the content
and its raw body on the attempt, as ``ItemRunner.redact_attempt`` passes them),
the CPU time of one redaction that finds nothing (every item of an honest
endpoint) and of one that finds the key echoed at the end; then the time to
build the redactor, once per run (in a worker thread). CPU time of this
thread, median of repeats.
Figures depend on the machine.
"""

from __future__ import annotations

import json
import random
import statistics
import string
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from runs.secrets.redaction import Redactor

RANDOM = random.Random(7)
TARGET_KEY = "sk-proj-" + "".join(
    RANDOM.choice(string.ascii_letters + string.digits + "_-") for _ in range(156)
)
JUDGE_KEY = "sk-ant-api03-" + "".join(
    RANDOM.choice(string.ascii_letters + string.digits) for _ in range(38)
)
WORDS = [
    "".join(RANDOM.choice(string.ascii_lowercase) for _ in range(RANDOM.randint(2, 9)))
    for _ in range(3000)
]


def prose(chars: int) -> str:
    parts: list[str] = []
    size = 0
    while size < chars:
        word = RANDOM.choice(WORDS) + RANDOM.choice((" ", " ", " ", ", ", ". ", "\n"))
        parts.append(word)
        size += len(word)
    return "".join(parts)[:chars]


def item(content: str) -> list[Any]:
    """What one attempt leaves: its log entry (with the raw body) and output."""
    body = json.dumps(
        {
            "id": "chatcmpl-1",
            "model": "gpt-4o-mini",
            "choices": [{"message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": 12, "completion_tokens": 345},
        }
    )
    attempt = {
        "number": 1,
        "started_at": "2026-01-01T00:00:00.000000+00:00",
        "outcome": "ok",
        "http_status": 200,
        "raw_body": body,
        "prompt_tokens": 12,
        "completion_tokens": 345,
        "model": "gpt-4o-mini",
        "cost": 0.0002,
    }
    return [attempt, content]


def cpu_seconds(call: Callable[[], Any], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        began = time.thread_time()
        call()
        times.append(time.thread_time() - began)
    return statistics.median(times)


def main() -> None:
    secrets = [("api_key", TARGET_KEY), ("judge_key", JUDGE_KEY)]
    began = time.thread_time()  # once: RE2 keeps what it compiled
    redactor = Redactor(secrets)
    build = time.thread_time() - began
    print(f"redactor of a {len(TARGET_KEY)} and a {len(JUDGE_KEY)} character key:")
    print(f"  built in {build * 1000:.1f} ms of CPU, {len(redactor.banks)} banks")
    for label, chars, repeats in (("2 KB", 2_000, 2_000), ("1 MB", 1_000_000, 20)):
        content = prose(chars)
        clean = item(content)
        echoed = item(content + " " + " ".join(TARGET_KEY))
        assert redactor.value(clean) is clean
        assert TARGET_KEY[8:40] not in json.dumps(redactor.value(echoed))
        nothing = cpu_seconds(partial(redactor.value, clean), repeats)
        found = cpu_seconds(partial(redactor.value, echoed), max(repeats // 10, 5))
        print(
            f"  {label} answer ({len(json.dumps(clean)):,} characters with its "
            f"raw body): {nothing * 1e6:,.0f} µs when clean, "
            f"{found * 1e6:,.0f} µs with the key echoed (spaced out)"
        )


if __name__ == "__main__":
    main()
