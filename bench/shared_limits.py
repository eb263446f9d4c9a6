"""The shared rate limit measured: two processes pacing calls to one target.

For each store that is configured (this process's; Redis with ``REDIS_URL``;
PostgreSQL with ``DATABASE_URL`` naming a migrated evalsite database, where
it writes only its own rows of ``runs_ratebucket``), two worker processes
each take calls from one shared bucket at ``--rpm`` with ``--coroutines``
callers for ``--seconds``, and the times they were let go are merged: the
combined rate (after the first second's burst) should be at most the limit.
The process store is the control: each process keeps its own bucket, so the
two together send twice the limit. It also prints the cost of one
reservation (sequential calls on a bucket that never makes them wait).

    .venv/bin/python bench/shared_limits.py
    REDIS_URL=redis://127.0.0.1:6379/0 \\
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/evalsite \\
        .venv/bin/python bench/shared_limits.py --seconds 20
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def setup() -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")
    import django

    django.setup()


def make_store(name: str) -> Any:
    from django.conf import settings

    from runs.executor import shared_limits

    if name == "redis":
        return shared_limits.RedisStore(settings.REDIS_URL)
    if name == "postgresql":
        return shared_limits.PostgresStore()
    return shared_limits.LocalStore()


async def worker(
    store_name: str, key: str, rpm: float, callers: int, seconds: float
) -> list[float]:
    from runs.executor.shared_limits import Degrading, SharedRateLimiter

    store = Degrading(make_store(store_name), 0)
    limiter = SharedRateLimiter(store, key, rpm)
    granted: list[float] = []
    end = time.time() + seconds

    async def caller() -> None:
        while time.time() < end:
            await limiter.acquire()
            granted.append(time.time())

    await asyncio.gather(*(caller() for _ in range(callers)))
    await store.aclose()
    return [t for t in granted if t <= end]


async def reservation_cost(store_name: str, calls: int) -> float:
    store = make_store(store_name)
    key = f"bench:{uuid.uuid4().hex}"
    began = time.perf_counter()
    for _ in range(calls):
        await store.reserve(key, 1e-9, 1e9)
    spent = time.perf_counter() - began
    close = getattr(store, "aclose", None)
    if close is not None:
        await close()
    return spent / calls


def most_in_any(times: list[float], seconds: float) -> int:
    times = sorted(times)
    most = first = 0
    for last, at in enumerate(times):
        while at - times[first] >= seconds:
            first += 1
        most = max(most, last - first + 1)
    return most


def measure(store_name: str, args: argparse.Namespace) -> None:
    key = f"bench:{uuid.uuid4().hex}"
    start_at = time.time() + 3.0  # both processes set up by then
    command = [
        sys.executable,
        __file__,
        "--worker",
        store_name,
        key,
        str(args.rpm),
        str(args.coroutines),
        str(args.seconds),
        str(start_at),
    ]
    workers = [
        subprocess.Popen(command, stdout=subprocess.PIPE, text=True, cwd=ROOT)
        for _ in range(2)
    ]
    times: list[float] = []
    counts = []
    for process in workers:
        out, _ = process.communicate(timeout=args.seconds + 60)
        got = json.loads(out)
        counts.append(len(got))
        times.extend(got)
    times.sort()
    span = times[-1] - times[0]
    burst = args.rpm / 60.0  # a second's worth goes at once
    rate = (len(times) - burst) / span * 60 if span > 0 else float("inf")
    cost = asyncio.run(reservation_cost(store_name, 2000))
    print(
        f"{store_name:10} limit {args.rpm:g}/min: {counts[0]} + {counts[1]} calls in "
        f"{span:.1f} s = {rate:.0f}/min together (after the burst); most in any "
        f"10 s: {most_in_any(times, 10.0)} (limit {args.rpm / 6 + burst + 1:.0f}); "
        f"one reservation {cost * 1e6:.0f} us"
    )


def main() -> None:
    if sys.argv[1:2] == ["--worker"]:
        store_name, key, rpm, callers, seconds, start_at = sys.argv[2:]
        setup()
        time.sleep(max(0.0, float(start_at) - time.time()))
        granted = asyncio.run(
            worker(store_name, key, float(rpm), int(callers), float(seconds))
        )
        print(json.dumps(granted))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rpm", type=float, default=600.0)
    parser.add_argument("--coroutines", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=15.0)
    args = parser.parse_args()
    setup()
    from django.conf import settings
    from django.db import connection

    stores = ["process"]
    if settings.REDIS_URL:
        stores.append("redis")
    if connection.vendor == "postgresql":
        stores.append("postgresql")
    for name in stores:
        measure(name, args)


if __name__ == "__main__":
    main()
