"""Where a measured run's time goes, by part, from py-spy's raw stacks.

    py-spy record -r 250 --format raw --threads -o stacks.txt -- \\
        .venv/bin/python bench/cpu_per_item.py --items 50000
    .venv/bin/python bench/where_time_goes.py stacks.txt [CPU_MS_PER_ITEM]

Only the stacks of the measured run count: the event loop's under
``cpu_per_item.measured_run`` and every other thread's but the set-up's and
idle workers'. Each sample goes to the first part (in ``PARTS``' order) its
stack matches for the database thread's work, otherwise to the innermost
frame's part, so that JSON encoding called by the HTTP client counts as JSON.
With the CPU per item (from ``cpu_per_item.py``) each part is also given in
milliseconds per item: py-spy samples a thread that is running or waiting to
run, so on a loaded machine the shares hold better than the seconds.
"""

from __future__ import annotations

import re
import sys
from collections import Counter

# (part, pattern): the database thread's parts match anywhere in the stack,
# the others the innermost frame that matches any of them.
DATABASE_PARTS = [
    ("database: result and score rows, SQL", r"results_write"),
    ("database: item pages", r"item_page"),
    (
        "database: other (claim, heartbeat, cancel poll, end of run, figures)",
        r"DatabaseSyncToAsync|ThreadPoolExecutor|asyncio_\d",
    ),
]
LOOP_PARTS = [
    ("JSON encoding", r"json/encoder|dumps \(json"),
    ("JSON decoding", r"json/decoder|loads \(json"),
    ("progress events", r"runs/events\.py"),
    ("target: demo model", r"runs/targets/demo\.py"),
    ("scorer", r"runs/scorers/|runs/plugins/scoring|score_inline|score_one"),
    ("redaction", r"runs/secrets/redaction"),
    ("target: reading the answer", r"parse_chat_response|parse_response|PlainAnswer"),
    ("target: the request body", r"chat_payload|chat_body|chat_messages|render_prompt"),
    (
        "aiohttp: reading the response",
        r"aiohttp/(client_proto|http_parser|streams)|ClientResponse\.",
    ),
    ("socket send (the kernel's loopback)", r"_SelectorSocketTransport\.write"),
    ("socket receive", r"_read_ready"),
    ("aiohttp: the request (session, connector, writer)", r"aiohttp/"),
    (
        "HTTP client: ours (keep-alive pool, llhttp parser, request head)",
        r"runs/calls/(keepalive|http_client)|httptools",
    ),
    (
        "executor: item runner, records, limits",
        r"runs/executor/|runs/calls/|timezone\.py",
    ),
    ("asyncio: loop, tasks, timers, queues", r"asyncio/|selectors\.py"),
]
IDLE = re.compile(r"concurrent/futures/thread\.py:\d+\)$")


def part_of(stack: str) -> str:
    for name, pattern in DATABASE_PARTS:
        if re.search(pattern, stack):
            return name
    for frame in reversed(stack.split(";")):
        for name, pattern in LOOP_PARTS:
            if re.search(pattern, frame):
                return name
    return "other"


def parts(path: str) -> Counter[str]:
    found: Counter[str] = Counter()
    with open(path) as lines:
        for line in lines:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            setup = "MainThread" in stack or "<module> (" in stack
            if (setup and "measured_run" not in stack) or IDLE.search(stack):
                continue
            found[part_of(stack)] += int(count)
    return found


def main() -> None:
    found = parts(sys.argv[1])
    per_item = float(sys.argv[2]) if len(sys.argv) > 2 else None
    total = sum(found.values())
    for name, count in found.most_common():
        line = f"{100 * count / total:5.1f}%  {name}"
        if per_item is not None:
            line += f"  ({per_item * count / total:.4f} ms per item)"
        print(line)
    print(f"{total} samples")


if __name__ == "__main__":
    main()
