"""A real browser against a real server: a run started from the form, watched live.

The server is Daphne in a subprocess with its own SQLite file (not the test
database), so the run executes on the server's loop exactly as in production
and progress reaches the page over the websocket.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parent.parent
USERNAME = "tester"
PASSWORD = "browser-test-password"
FINAL_STATUSES = {"completed", "completed_with_errors", "failed", "cancelled"}
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SEED = f"""
from django.contrib.auth.models import User
from runs.importers import dataset_create_from_items
from runs.models import Membership, Project, Target

user = User.objects.create_user({USERNAME!r}, password={PASSWORD!r})
project = Project.objects.create(name="Browser")
Membership.objects.create(project=project, user=user, role="admin")
items = [
    {{"id": f"q{{i}}", "input": f"What is {{i}} + {{i * 2}}?", "expected": str(i * 3)}}
    for i in range(40)
]
dataset_create_from_items(project=project, user=None, name="sums", items=items)
Target.objects.create(
    project=project,
    name="Demo model",
    kind="demo",
    config={{"min_latency_ms": 100, "max_latency_ms": 300, "accuracy": 0.8,
             "transient_error_rate": 0}},
)
"""


def chromium_path() -> str:
    path = shutil.which("chromium") or "/usr/bin/chromium"
    if not os.path.exists(path):
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"chromium is not installed ({path})")
        pytest.skip(f"chromium is not installed ({path})")
    return path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until_serving(url: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"daphne exited with {process.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            time.sleep(0.2)
    raise AssertionError(f"{url} did not answer in time")


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    """A Daphne server on a free port with a fresh database and seed data."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {"DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE"}
    }
    env |= {
        "EVALSITE_DATA_DIR": str(tmp_path / "data"),
        "EVALSITE_DEBUG": "1",
        "PYTHONUNBUFFERED": "1",
    }
    manage = [sys.executable, str(ROOT / "manage.py")]
    subprocess.run(
        [*manage, "migrate", "--no-input", "-v", "0"], env=env, cwd=ROOT, check=True
    )
    subprocess.run([*manage, "shell", "-c", SEED], env=env, cwd=ROOT, check=True)
    port = free_port()
    log = (tmp_path / "daphne.log").open("wb")
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
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_serving(f"{base}/login/", process)
        yield base
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)
        log.close()


def test_a_run_started_from_the_form_progresses_live(
    server: str, tmp_path: Path
) -> None:
    executable = chromium_path()
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=executable, args=CHROMIUM_ARGS
        )
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            problems: list[str] = []
            page.on("pageerror", lambda error: problems.append(str(error)))
            page.on(
                "console",
                lambda message: (
                    message.text.startswith("htmx:") and problems.append(message.text)
                ),
            )
            page.goto(f"{server}/login/")
            page.fill("#id_username", USERNAME)
            page.fill("#id_password", PASSWORD)
            page.click("button[type=submit]")
            page.wait_for_url(f"{server}/")

            page.goto(f"{server}/runs/new/")
            page.select_option("#id_dataset", label="Browser / sums v1 (40 items)")
            page.select_option("#id_target", label="Browser / Demo model (demo)")
            page.fill("#id_concurrency", "4")
            page.fill("#id_name", "watched")
            page.click("button[type=submit].primary")
            page.wait_for_url(re.compile(r"/runs/\d+/$"))

            assert page.evaluate("typeof htmx") == "object"
            page.evaluate("window.__marker = 1")
            seen = watch_progress(page)
            # the results table (dataset order) is brought up to date in place
            page.wait_for_function(
                # A function, not an expression: the page's CSP forbids eval.
                "() => document.querySelectorAll('#results tbody tr').length === 40"
            )
            page.screenshot(path=str(tmp_path / "run-page.png"), full_page=True)
            if shot := os.environ.get("EVALSITE_SCREENSHOT"):
                page.screenshot(path=shot, full_page=True)

            assert page.evaluate("window.__marker") == 1  # never reloaded
            processed = [count for count, _ in seen]
            assert processed == sorted(processed)
            assert any(0 < count < 40 for count in processed)
            assert processed[-1] == 40
            assert seen[-1][1] in FINAL_STATUSES
            status_text = page.inner_text("#run-status")
            assert status_text.strip().lower().startswith(("completed", "failed"))
            live_rows = page.locator("#live-rows > tr")
            assert live_rows.count() == 40  # every item, each a whole row
            assert live_rows.first.locator("td").count() == 7
            assert problems == []
        finally:
            browser.close()


def watch_progress(page: Page, *, seconds: float = 60) -> list[tuple[int, str]]:
    """Sample the live progress block until it shows a final status."""
    seen: list[tuple[int, str]] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        sample = page.evaluate(
            """() => {
                const block = document.getElementById("run-progress");
                return [Number(block.dataset.processed), block.dataset.status];
            }"""
        )
        seen.append((sample[0], sample[1]))
        if sample[1] in FINAL_STATUSES:
            return seen
        time.sleep(0.1)
    raise AssertionError(f"the page never showed a final status: {seen[-5:]}")


def test_start_the_demo_run_starts_it_and_shows_it_live(server: str) -> None:
    executable = chromium_path()
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=executable, args=CHROMIUM_ARGS
        )
        try:
            page = browser.new_page()
            problems: list[str] = []
            page.on("pageerror", lambda error: problems.append(str(error)))
            page.goto(f"{server}/login/")
            page.fill("#id_username", USERNAME)
            page.fill("#id_password", PASSWORD)
            page.click("button[type=submit]")
            page.wait_for_url(f"{server}/")

            page.get_by_role("button", name="Start the demo run").first.click()
            page.wait_for_url(re.compile(r"/runs/\d+/$"))

            assert "Demo run" in page.inner_text("h1")
            seen = watch_progress(page)
            assert seen[-1][0] == 40  # every item of the seeded dataset
            assert seen[-1][1] in FINAL_STATUSES
            assert problems == []
        finally:
            browser.close()
