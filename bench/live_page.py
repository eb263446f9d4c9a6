"""The run page's live view while items finish by the thousand, in a browser.

A Daphne server on a scratch database (a temporary SQLite file, or with
``DATABASE_URL`` a scratch PostgreSQL database dropped at the end) serves the
run page to a headless Chromium (Playwright) signed in to it, while:

- ``--mode run`` (default): the server executes a run of ``--items`` items
  against the offline ``demo`` target at no latency, as ``Start run`` does in
  the embedded mode: the executor is on the server's loop, its events on the
  in-memory channel layer;
- ``--mode synthetic``: another process writes the results of a run the way
  an executor does, ``--rate`` items a second in batches of ``--batch`` (the
  executor flushes up to 1,000 results at a time when it is that fast;
  the default of 500 gives twice its events), announcing
  each batch on the Redis channel layer (``REDIS_URL``, required) that the
  server listens to: the event stream that rate produces, whatever rate this
  machine could execute at.

Once a second the bench samples, in the page: websocket messages received
(and their bytes), long tasks (``PerformanceObserver('longtask')``), the gaps
between animation frames, the DOM's element count; and over the DevTools
protocol ``Performance.getMetrics`` (JS heap used, DOM nodes, main-thread
task time). The heap is also read after a forced garbage collection once the
run is warm (``--warmup`` seconds) and at its end: the figures to compare.
At the end the page's counts are compared with the stored run's.

    .venv/bin/python bench/live_page.py --items 150000
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres \\
        .venv/bin/python bench/live_page.py --items 150000
    REDIS_URL=redis://127.0.0.1:6379/9 .venv/bin/python bench/live_page.py \\
        --mode synthetic --rate 5000 --seconds 45
    .venv/bin/python bench/live_page.py --root /tmp/older-checkout   # before

``--root`` serves another checkout (the code before a change) with this
bench; ``--json-out`` writes every sample.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from analysis_bench import scratch_database
from harness import ROOT, free_port, write_dataset

USERNAME = "bench"
PASSWORD = "live-page-bench-password"
FINAL = {"completed", "completed_with_errors", "failed", "cancelled"}
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--enable-precise-memory-info",
]

SEED = """
from django.contrib.auth.models import User
from runs.models import Membership, Project, Target
user = User.objects.create_user({user!r}, password={password!r})
project = Project.objects.create(name="Live")
Membership.objects.create(project=project, user=user, role="admin")
target = Target.objects.create(project=project, name="Instant", kind="demo",
    config={{"min_latency_ms": 0, "max_latency_ms": 0, "accuracy": 0.9,
             "transient_error_rate": 0}})
print(target.pk)
"""

DATASET = """
from runs.models import Dataset
print(Dataset.objects.get(name="live").pk)
"""

# Writes results as an executor does, at most ``rate`` a second in batches,
# for at most ``seconds``, and sends the progress events that an executor
# storing ``events`` batches a second sends (unpaced, straight onto the layer,
# as executors in several processes would: no process paces them all),
# whether or not this machine can write that fast; then ends the run. It
# makes the run and holds it (as a live executor, so that the server's
# launcher leaves it alone), tells its id, and starts on a line of input.
DRIVER = """
import sys
import time
from django.utils import timezone
from runs import events
from runs.executor import store
from runs.executor.store import ResultRecord, ScoreRecord
from runs.models import Item, Result, Run
from runs.analysis.figures import run_figures_store
from runs.models import Dataset, Target
from runs.results.services import run_create
rate, batch, per_second, seconds = {rate}, {batch}, {events}, {seconds}
run = run_create(user=None, dataset=Dataset.objects.get(name="live"),
    target=Target.objects.get(name="Instant"), scorers=["exact_match"],
    launch=False, name="synthetic")
run_id = run.pk
store.run_claim(run_id)
print(run_id, flush=True)
sys.stdin.readline()
items = list(Item.objects.filter(dataset_id=run.dataset_id).order_by("index")
             .values_list("pk", "index"))
start = time.monotonic()
sent = written = 0
for n in range(0, len(items), batch):
    elapsed = time.monotonic() - start
    if elapsed > seconds:
        break
    time.sleep(max(0.0, n / rate - elapsed))
    now = timezone.now()
    records = [
        ResultRecord(item_id=pk, item_index=index, epoch=0,
            status=Result.Status.SUCCEEDED if index % 50 else Result.Status.FAILED,
            output=str(index), error_type="" if index % 50 else "DemoError",
            attempts=[{{"number": 1, "outcome": "ok"}}],
            started_at=now, finished_at=now, latency_ms=1.0,
            scores=[ScoreRecord("exact_match", 1.0, index % 3 != 0, reason="")])
        for pk, index in items[n:n + batch]
    ]
    store.results_write(run_id, records)
    written += len(records)
    Run.objects.filter(pk=run_id).update(heartbeat_at=now)
    due = int((time.monotonic() - start) * per_second)
    while sent < max(due, 1):
        events.publish_run_update_sync(run_id)
        sent += 1
elapsed = time.monotonic() - start
store.run_finish(run_id, cancelled=False)
run_figures_store(run_id)
events.publish_run_update_sync(run_id, final=True)
print(written / elapsed, sent / elapsed)
"""

STORED = """
import json
from runs.models import Run
run = Run.objects.get(pk={run_id})
print(json.dumps({{
    "status": run.status, "total": run.total, "succeeded": run.succeeded,
    "failed": run.failed, "timed_out": run.timed_out, "cancelled": run.cancelled,
    "skipped": run.skipped,
    "seconds": (run.finished_at - run.started_at).total_seconds(),
}}))
"""

# Counts what reaches the page, from before its first script runs.
INSTRUMENT = """
(() => {
  const live = window.__bench = {
    messages: [], bytes: 0, longTasks: [], frames: 0, gaps: [], maxGap: 0,
  };
  const Native = window.WebSocket;
  function Counted(url, protocols) {
    const socket = new Native(url, protocols);
    socket.addEventListener("message", (event) => {
      live.messages.push(performance.now());
      live.bytes += event.data.length;
    });
    return socket;
  }
  Counted.prototype = Native.prototype;
  for (const key of ["CONNECTING", "OPEN", "CLOSING", "CLOSED"]) {
    Counted[key] = Native[key];
  }
  window.WebSocket = Counted;
  new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      live.longTasks.push([entry.startTime, entry.duration]);
    }
  }).observe({ type: "longtask", buffered: true });
  let last = null;
  function frame(now) {
    if (last !== null) {
      const gap = now - last;
      live.frames += 1;
      if (gap > live.maxGap) live.maxGap = gap;
      if (gap > 50) live.gaps.push([now, gap]);
    }
    last = now;
    requestAnimationFrame(frame);
  }
  requestAnimationFrame(frame);
})();
"""

SAMPLE = """() => {
  const live = window.__bench;
  const progress = document.getElementById("run-progress");
  const counts = {};
  if (progress) {
    for (const row of progress.querySelectorAll("dl.counts > div")) {
      const name = row.querySelector("dt").textContent.trim();
      counts[name] = row.querySelector("dd").textContent.trim();
    }
  }
  const rows = document.getElementById("live-rows");
  return {
    now: performance.now(),
    messages: live.messages.length,
    bytes: live.bytes,
    longTasks: live.longTasks.length,
    frames: live.frames,
    elements: document.getElementsByTagName("*").length,
    liveRows: rows ? rows.rows.length : null,
    status: progress ? progress.dataset.status : null,
    final: progress ? progress.dataset.final === "true" : false,
    processed: progress ? Number(progress.dataset.processed) : null,
    counts: counts,
  };
}"""

DETAIL = """() => {
  const live = window.__bench;
  return { messages: live.messages, longTasks: live.longTasks, gaps: live.gaps,
           maxGap: live.maxGap, frames: live.frames };
}"""


def load() -> float:
    return os.getloadavg()[0]


def cpu_seconds(pid: int) -> float:
    """User and system CPU of a process, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def browser_cpu_seconds() -> tuple[float, float]:
    """CPU of this process's Chromium: all its processes, and its renderers."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    mine = {os.getpid()}
    grew = True
    while grew:
        grew = False
        for pid, parent in parents.items():
            if parent in mine and pid not in mine:
                mine.add(pid)
                grew = True
    total = renderers = 0.0
    for pid in mine - {os.getpid()}:
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes()
            seconds = cpu_seconds(pid)
        except OSError:
            continue
        if b"chrom" not in command:
            continue
        total += seconds
        if b"--type=renderer" in command:
            renderers += seconds
    return total, renderers


def manage(root: Path, env: dict[str, str], *args: str) -> str:
    return subprocess.run(
        [sys.executable, str(root / "manage.py"), *args],
        env=env,
        cwd=root,
        check=True,
        stdout=subprocess.PIPE,
        text=True,
    ).stdout


def shell(root: Path, env: dict[str, str], code: str) -> str:
    return manage(root, env, "shell", "-c", code).strip().splitlines()[-1]


def wait_serving(url: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"daphne exited with {process.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            time.sleep(0.3)
    raise SystemExit(f"{url} did not answer in time")


def heap(cdp: Any, *, collect: bool) -> dict[str, float]:
    if collect:
        cdp.send("HeapProfiler.collectGarbage")
    metrics = cdp.send("Performance.getMetrics")["metrics"]
    return {m["name"]: m["value"] for m in metrics}


def per_second(stamps: list[float], start: float, end: float) -> list[int]:
    """Messages in each whole second from ``start`` to ``end`` (ms stamps)."""
    seconds = max(1, int((end - start) / 1000))
    buckets = [0] * seconds
    for stamp in stamps:
        index = int((stamp - start) / 1000)
        if 0 <= index < seconds:
            buckets[index] += 1
    return buckets


def profile_top(profile: dict[str, Any], count: int = 20) -> list[str]:
    """The functions the renderer spent most of its sampled time in (self)."""
    nodes = {node["id"]: node for node in profile["nodes"]}
    gaps = profile.get("timeDeltas", [])
    spent: dict[str, float] = {}
    for sample, gap in zip(profile.get("samples", []), gaps, strict=False):
        frame = nodes[sample]["callFrame"]
        url = frame["url"].rsplit("/", 1)[-1]
        key = f"{frame['functionName'] or '(anonymous)'} {url}:{frame['lineNumber']}"
        spent[key] = spent.get(key, 0.0) + gap / 1000
    total = sum(spent.values()) or 1.0
    ranked = sorted(spent.items(), key=lambda kv: -kv[1])[:count]
    return [f"{ms / total:6.1%} {ms:8.0f} ms  {key}" for key, ms in ranked]


def bench(args: argparse.Namespace) -> dict[str, Any]:
    from playwright.sync_api import sync_playwright

    root = Path(args.root).resolve()
    scratch = scratch_database(keep=False)
    tmp = Path(tempfile.mkdtemp(prefix="evalsite-live-page-"))
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE"}
    }
    env |= scratch.env | {"PYTHONUNBUFFERED": "1", "PYTHONPATH": str(root)}
    if args.mode == "synthetic":
        if not os.environ.get("REDIS_URL"):
            raise SystemExit("--mode synthetic needs REDIS_URL (a shared layer)")
        env["REDIS_URL"] = os.environ["REDIS_URL"]
    process = None
    try:
        print(f"# {scratch.label}, serving {root}, load {load():.1f}", flush=True)
        manage(root, env, "migrate", "--no-input", "-v", "0")
        manage(root, env, "collectstatic", "--no-input", "-v", "0")
        target_id = shell(root, env, SEED.format(user=USERNAME, password=PASSWORD))
        data = write_dataset(tmp / "live.jsonl", args.items, seed=23)
        manage(root, env, "import_dataset", "--project", "Live", str(data), "-v", "0")
        dataset_id = shell(root, env, DATASET)

        port = free_port()
        log = (tmp / "daphne.log").open("wb")
        process = subprocess.Popen(
            [
                str(Path(sys.executable).parent / "daphne"),
                "-b",
                "127.0.0.1",
                "-p",
                str(port),
                "evalsite.asgi:application",
            ],
            env=env,
            cwd=root,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        base = f"http://127.0.0.1:{port}"
        wait_serving(f"{base}/login/", process)
        chromium = shutil.which("chromium") or "/usr/bin/chromium"
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=chromium, args=CHROMIUM_ARGS
            )
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            page.set_default_timeout(300_000)  # a loaded machine
            errors: list[str] = []
            page.on("pageerror", lambda error: errors.append(str(error)))
            page.add_init_script(INSTRUMENT)
            page.goto(f"{base}/login/")
            page.fill("#id_username", USERNAME)
            page.fill("#id_password", PASSWORD)
            page.click("button[type=submit]")
            page.wait_for_url(f"{base}/")
            cdp = page.context.new_cdp_session(page)
            cdp.send("Performance.enable")
            driver = None
            server_cpu0 = cpu_seconds(process.pid)
            browser_cpu0 = browser_cpu_seconds()
            if args.mode == "run":
                page.goto(f"{base}/runs/new/")
                page.select_option("#id_dataset", value=dataset_id)
                page.select_option("#id_target", value=target_id)
                page.fill("#id_concurrency", str(args.concurrency))
                page.fill("#id_name", "live")
                page.click("button[type=submit].primary")
                page.wait_for_url(lambda url: "/runs/" in url and "/new" not in url)
                run_id = page.url.rstrip("/").rsplit("/", 1)[1]
            else:
                code = DRIVER.format(
                    rate=args.rate,
                    batch=args.batch,
                    events=args.events,
                    seconds=args.seconds,
                )
                driver = subprocess.Popen(
                    [sys.executable, str(root / "manage.py"), "shell", "-c", code],
                    env=env,
                    cwd=root,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    text=True,
                )
                assert driver.stdin is not None and driver.stdout is not None
                run_id = ""
                while not run_id.isdigit():  # after what the shell prints first
                    run_id = driver.stdout.readline().strip()
                page.goto(f"{base}/runs/{run_id}/")
                driver.stdin.write("go\n")
                driver.stdin.flush()
            print(f"# run {run_id} on {page.url}", flush=True)
            started = time.monotonic()
            samples: list[dict[str, Any]] = []
            warm: dict[str, float] | None = None
            warm_at = 0.0
            profile_until = 0.0
            profile: dict[str, Any] | None = None
            while True:
                sample = page.evaluate(SAMPLE)
                metrics = heap(cdp, collect=False)
                sample |= {
                    "t": time.monotonic() - started,
                    "load": load(),
                    "heap_mb": metrics["JSHeapUsedSize"] / 2**20,
                    "nodes": metrics["Nodes"],
                    "listeners": metrics["JSEventListeners"],
                    "task_s": metrics["TaskDuration"],
                }
                samples.append(sample)
                print(
                    f"t={sample['t']:5.1f}s processed={sample['processed']} "
                    f"messages={sample['messages']} heap={sample['heap_mb']:.1f}MB "
                    f"nodes={sample['nodes']:.0f} elements={sample['elements']} "
                    f"long={sample['longTasks']} load={sample['load']:.1f}",
                    flush=True,
                )
                if warm is None and sample["t"] >= args.warmup:
                    warm = heap(cdp, collect=True)
                    warm_at = sample["now"]
                    if args.profile:
                        cdp.send("Profiler.enable")
                        cdp.send("Profiler.start")
                        profile_until = sample["t"] + args.profile
                if profile_until and sample["t"] >= profile_until:
                    profile = cdp.send("Profiler.stop")["profile"]
                    profile_until = 0.0
                if sample["final"]:
                    break
                if sample["t"] > args.timeout:
                    raise SystemExit("the page never showed the run's end")
                time.sleep(args.sample)
            ended_at = page.evaluate("() => performance.now()")
            server_cpu = cpu_seconds(process.pid) - server_cpu0
            browser_cpu = browser_cpu_seconds()
            browser_seconds = time.monotonic() - started
            achieved = event_rate = None
            if driver is not None:
                out, _ = driver.communicate(timeout=300)
                achieved, event_rate = map(float, out.strip().splitlines()[-1].split())
            time.sleep(3)  # the summary and result table refresh at the end
            last = page.evaluate(SAMPLE)
            end = heap(cdp, collect=True)
            detail = page.evaluate(DETAIL)
            browser.close()
        stored = json.loads(shell(root, env, STORED.format(run_id=run_id)))
    finally:
        if process is not None:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
        scratch.drop()
        shutil.rmtree(tmp, ignore_errors=True)

    if warm is None:  # a run shorter than the warm-up
        warm, warm_at = end, ended_at
    first = detail["messages"][0] if detail["messages"] else warm_at
    rates = per_second(detail["messages"], first, ended_at)
    running = [s for s in samples if not s["final"]]
    shown = last["counts"]
    page_counts = {
        "succeeded": int(shown.get("Answered", -1)),
        "failed": int(shown.get("Failed", -1)),
        "timed_out": int(shown.get("Timed out", -1)),
        "cancelled": int(shown.get("Cancelled", -1)),
        "skipped": int(shown.get("Skipped", -1)),
        "processed": last["processed"],
        "status": last["status"],
    }
    stored_counts = {k: stored[k] for k in page_counts if k in stored} | {
        "processed": stored["succeeded"]
        + stored["failed"]
        + stored["timed_out"]
        + stored["cancelled"],
    }
    long_tasks = [d for _, d in detail["longTasks"]]
    report = {
        "mode": args.mode,
        "database": "postgresql" if "DATABASE_URL" in scratch.env else "sqlite",
        "items": args.items,
        "run_seconds": stored["seconds"],
        "items_per_second": (stored["succeeded"] + stored["failed"])
        / stored["seconds"],
        "driver_items_per_second": achieved,
        "driver_events_per_second": event_rate,
        "server_cpu_s": server_cpu,
        "browser_cpu_s": browser_cpu[0] - browser_cpu0[0],
        "renderer_cpu_s": browser_cpu[1] - browser_cpu0[1],
        "renderer_cpu_share": (browser_cpu[1] - browser_cpu0[1]) / browser_seconds,
        "load_median": statistics.median(s["load"] for s in samples),
        "messages": len(detail["messages"]),
        "messages_per_second_max": max(rates),
        "messages_per_second_median": statistics.median(rates),
        "bytes": last["bytes"],
        "long_tasks": len(long_tasks),
        "long_task_max_ms": max(long_tasks, default=0.0),
        "frame_gap_max_ms": detail["maxGap"],
        "frame_gaps_over_50ms": len(detail["gaps"]),
        "frames": detail["frames"],
        "main_thread_busy": (end["TaskDuration"] - warm["TaskDuration"])
        / max(1e-9, (ended_at - warm_at) / 1000),
        "heap_mb_warm": warm["JSHeapUsedSize"] / 2**20,
        "heap_mb_end": end["JSHeapUsedSize"] / 2**20,
        "heap_mb_max_sampled": max(s["heap_mb"] for s in samples),
        "nodes_warm": warm["Nodes"],
        "nodes_end": end["Nodes"],
        "nodes_max_sampled": max(s["nodes"] for s in samples),
        "elements_max_running": max((s["elements"] for s in running), default=0),
        "live_rows_max": max((s["liveRows"] or 0 for s in samples), default=0),
        "page": page_counts,
        "stored": stored_counts,
        "exact": all(page_counts[k] == stored_counts.get(k) for k in stored_counts),
        "page_errors": errors,
    }
    if profile is not None:
        report["profile_top"] = profile_top(profile)
    if args.json_out:
        Path(args.json_out).write_text(
            json.dumps({"report": report, "samples": samples}, indent=1)
        )
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=["run", "synthetic"], default="run")
    parser.add_argument("--items", type=int, default=150_000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--rate", type=float, default=5000, help="synthetic items/s")
    parser.add_argument("--batch", type=int, default=500, help="synthetic batch")
    parser.add_argument(
        "--events", type=float, default=10, help="synthetic events a second"
    )
    parser.add_argument(
        "--seconds", type=float, default=45, help="synthetic writes at most"
    )
    parser.add_argument("--sample", type=float, default=1.0, help="seconds")
    parser.add_argument("--warmup", type=float, default=5.0, help="seconds")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds")
    parser.add_argument("--profile", type=float, default=0.0, help="seconds")
    parser.add_argument("--root", default=str(ROOT), help="the checkout to serve")
    parser.add_argument("--json-out")
    args = parser.parse_args()
    report = bench(args)
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
