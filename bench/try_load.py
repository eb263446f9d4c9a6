"""Does "try" (send one input to a target) slow the other pages down?

The script serves one project directory (``SOURCE``, default: this checkout)
with Daphne on a free loopback port, as ``make run`` does, in a fresh
EVALSITE_DATA_DIR (embedded SQLite, migrated; ``EVALSITE_TARGET_ALLOW=
loopback,public``). It seeds a project whose ``--users`` editors each have an
API key, and one ``openai_chat`` target pointing at the local fake model
server (``runs/testing/fake_openai.py``, in its own process, answering every
request after ``--latency-ms``: as long as a try waits at most, 5 s).

Then, twice, it sends ``--logins`` GETs of the log-in page, one every
``--pace`` seconds, each timed on its own (a slow answer does not hold back
the next request):

1. alone (the baseline);
2. while ``--tries`` tries (``POST /api/v1/targets/{id}/try``), spread over
   the users, are sent all at once, the first GET ``--pace`` / 2 after them.

It prints the log-in page's median and maximum latency in both cases and the
tries' HTTP statuses (200: tried, whatever the target answered; 429: refused
by the per-user limit). Run it with the project's virtual environment; the
server runs the SOURCE's code (its directory first on PYTHONPATH), the fake
server this checkout's::

    .venv/bin/python bench/try_load.py
    git archive <old-commit> | (mkdir -p /tmp/before && tar -x -C /tmp/before)
    .venv/bin/python bench/try_load.py /tmp/before

The figures depend on the machine and its other load; compare runs taken one
after the other on the same machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from http_bench import daphne, free_port, note, server_env

ROOT = Path(__file__).resolve().parent.parent
PASSWORD = "try-load-password-not-secret"
LOGIN_PATH = "/login/"


# -- seeding (runs in a child process, with the source's code) ---------------------


def seed(*, users: int, base_url: str) -> dict:
    from django.apps import apps

    from runs.projects.services import api_key_create, membership_add, project_create
    from runs.targets.services import target_create

    """A project, its editors with one API key each, and a target at ``base_url``."""
    from django.contrib.auth.models import User

    owner = User.objects.create_user("owner", "owner@example.org", PASSWORD)
    project = project_create(name="Try load", owner=owner)
    keys = []
    for n in range(users):
        name = f"editor{n}"
        User.objects.create_user(name, f"{name}@example.org", PASSWORD)
        membership_add(project=project, actor=owner, user=name)
        editor = User.objects.get(username=name)
        keys.append(api_key_create(user=editor, name="try-load")[1])
    target = target_create(
        project=project,
        user=owner,
        name="Slow model",
        kind="openai_chat",
        config={"base_url": base_url, "model": "fake"},
    )
    return {
        "keys": keys,
        "target_id": target.pk,
        "code": apps.get_app_config("runs").path,
    }


def seed_main(users: int, base_url: str) -> None:
    sys.path.insert(0, os.getcwd())
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")
    import django

    django.setup()
    print(json.dumps(seed(users=users, base_url=base_url)))


# -- load ------------------------------------------------------------------------


def timed_logins(base: str, count: int, pace: float, offset: float) -> list[float]:
    """GET the log-in page ``count`` times, one every ``pace`` s; seconds each."""
    import httpx

    latencies: list[float] = [float("nan")] * count
    start = time.monotonic() + offset

    def one(index: int) -> None:
        time.sleep(max(0.0, start + index * pace - time.monotonic()))
        with httpx.Client(base_url=base, timeout=120) as client:
            began = time.perf_counter()
            answer = client.get(LOGIN_PATH)
            latencies[index] = time.perf_counter() - began
        if answer.status_code != 200:
            raise SystemExit(f"{LOGIN_PATH} answered {answer.status_code}")

    threads = [threading.Thread(target=one, args=(n,)) for n in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return latencies


def send_tries(
    base: str, target_id: int, keys: list[str], count: int, outcomes: list[tuple]
) -> list[threading.Thread]:
    """Start ``count`` tries at once, user after user.

    Each appends (status, seconds, what the try found: "answer", the error's
    type, or "" when refused) to ``outcomes``; the status is an exception's
    name when the server did not answer.
    """
    import httpx

    barrier = threading.Barrier(count)

    def one(index: int) -> None:
        key = keys[index % len(keys)]
        with httpx.Client(base_url=base, timeout=120) as client:
            barrier.wait()
            began = time.perf_counter()
            try:
                answer = client.post(
                    f"/api/v1/targets/{target_id}/try",
                    json={"input": "What is 12 + 30?"},
                    headers={"Authorization": f"Bearer {key}"},
                )
            except httpx.HTTPError as exc:
                outcomes.append((type(exc).__name__, time.perf_counter() - began, ""))
                return
        seconds = time.perf_counter() - began
        found = ""
        if answer.status_code == 200:
            body = answer.json()
            found = "answer" if body["ok"] else body["error_type"]
        outcomes.append((str(answer.status_code), seconds, found))

    threads = [threading.Thread(target=one, args=(n,)) for n in range(count)]
    for thread in threads:
        thread.start()
    return threads


def summary(latencies: list[float]) -> str:
    ms = [1000 * s for s in latencies]
    return f"median {statistics.median(ms):8.1f} ms   max {max(ms):8.1f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("source", nargs="?", default=str(ROOT), type=Path)
    parser.add_argument("--users", type=int, default=8)
    parser.add_argument("--tries", type=int, default=16)
    parser.add_argument("--logins", type=int, default=20)
    parser.add_argument("--pace", type=float, default=0.5, help="seconds between GETs")
    parser.add_argument("--latency-ms", type=float, default=5000.0)
    parser.add_argument("--keep", action="store_true", help="keep the data directory")
    parser.add_argument("--seed-only", nargs=2, metavar=("USERS", "BASE_URL"))
    args = parser.parse_args()
    if args.seed_only:
        seed_main(int(args.seed_only[0]), args.seed_only[1])
        return

    python = sys.executable
    source = args.source.resolve()
    data_dir = Path(tempfile.mkdtemp(prefix="try-load-"))
    env = server_env(source, data_dir, {"EVALSITE_TARGET_ALLOW": "loopback,public"})
    fake_port = free_port()
    fake_argv = ["-m", "runs.testing.fake_openai", "--port", str(fake_port)]
    fake = subprocess.Popen(
        [python, *fake_argv, "--latency-ms", str(args.latency_ms)],
        cwd=ROOT,
        env=server_env(ROOT, data_dir, {}),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
    )
    try:
        note(f"migrating and seeding in {data_dir} with {source}")
        subprocess.run(
            [python, "manage.py", "migrate", "--no-input", "-v", "0"],
            cwd=source,
            env=env,
            check=True,
            stdin=subprocess.DEVNULL,
        )
        fake_url = f"http://127.0.0.1:{fake_port}/v1"
        out = subprocess.run(
            [python, __file__, "--seed-only", str(args.users), fake_url],
            cwd=source,
            env=env,
            check=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            text=True,
        ).stdout
        seeded = json.loads(out.strip().splitlines()[-1])
        if Path(seeded["code"]).resolve() != (source / "runs").resolve():
            raise SystemExit(f"seeded with {seeded['code']}, not {source}")
        with daphne(python, source, env, data_dir / "daphne.log") as (_, base):
            timed_logins(base, 3, 0.0, 0.0)  # warm-up: first-request costs
            alone = timed_logins(base, args.logins, args.pace, 0.0)
            outcomes: list[tuple] = []
            tries = send_tries(
                base, seeded["target_id"], seeded["keys"], args.tries, outcomes
            )
            loaded = timed_logins(base, args.logins, args.pace, args.pace / 2)
            for thread in tries:
                thread.join()
    finally:
        fake.terminate()
        fake.wait()
        if not args.keep:
            subprocess.run(["rm", "-rf", str(data_dir)], check=False)

    statuses = [status for status, _, _ in outcomes]
    counts = {s: statuses.count(s) for s in sorted(set(statuses))}
    found = [what for *_, what in outcomes if what]
    found_counts = {f: found.count(f) for f in sorted(set(found))}
    print(f"source: {source}")
    print(f"{LOGIN_PATH} alone:            {summary(alone)}  ({args.logins} GETs)")
    print(f"{LOGIN_PATH} during the tries: {summary(loaded)}")
    print(
        f"tries: {args.tries} over {min(args.users, args.tries)} users, "
        f"HTTP statuses {counts}, found {found_counts}"
    )
    print(f"tries' own latency:          {summary([s for _, s, _ in outcomes])}")


if __name__ == "__main__":
    main()
