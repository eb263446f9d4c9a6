"""What the browser tests share: a real server, a signed-in Chromium page.

The server is Daphne in a subprocess with its own SQLite file (not the test
database), so a run executes on the server's loop exactly as in production
and progress reaches the page over the websocket. ``manage_shell`` runs code
in that same database; ``signed_in_page`` opens a page signed in to it.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from playwright.sync_api import ConsoleMessage, Page, ViewportSize

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
from runs.datasets.importers import dataset_create_from_items
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


def server_env(tmp_path: Path) -> dict[str, str]:
    """The environment of the server and of manage.py run against its database."""
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
    return env


def manage(tmp_path: Path, *args: str) -> str:
    """Run manage.py against the server's database; its standard output."""
    return subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), *args],
        env=server_env(tmp_path),
        cwd=ROOT,
        check=True,
        stdout=subprocess.PIPE,
        text=True,
    ).stdout


def manage_shell(tmp_path: Path, code: str) -> str:
    """Run ``code`` with ``manage.py shell -c`` in the server's database;
    what it printed."""
    return manage(tmp_path, "shell", "-c", code)


@pytest.fixture(scope="session")
def seeded_site(tmp_path_factory: pytest.TempPathFactory, migrated_site: Path) -> Path:
    """A data directory migrated (a copy of the session's) and seeded once;
    each server starts on a copy of it."""
    site = tmp_path_factory.mktemp("browser-site")
    shutil.copytree(migrated_site, site / "data")
    manage_shell(site, SEED)
    return site / "data"


@pytest.fixture
def server(tmp_path: Path, seeded_site: Path) -> Iterator[str]:
    """A Daphne server on a free port with its own copy of the seeded database
    (and of the data directory's keys, which its secrets are sealed with)."""
    shutil.copytree(seeded_site, tmp_path / "data")
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
        env=server_env(tmp_path),
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


def console_error(message: ConsoleMessage) -> bool:
    return message.type == "error"


@contextmanager
def signed_in_page(
    server: str,
    *,
    viewport: ViewportSize | None = None,
    console: Callable[[ConsoleMessage], bool] | None = console_error,
) -> Iterator[tuple[Page, list[str]]]:
    """A Chromium page signed in to ``server`` as USERNAME, and the problems it
    met: every page error, and the console messages ``console`` picks (none
    when it is None). ``viewport`` None keeps Playwright's default size."""
    executable = chromium_path()
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=executable, args=CHROMIUM_ARGS
        )
        try:
            page = (
                browser.new_page()
                if viewport is None
                else browser.new_page(viewport=viewport)
            )
            problems: list[str] = []
            page.on("pageerror", lambda error: problems.append(str(error)))
            if console is not None:
                picks = console
                page.on(
                    "console",
                    lambda message: picks(message) and problems.append(message.text),
                )
            page.goto(f"{server}/login/")
            page.fill("#id_username", USERNAME)
            page.fill("#id_password", PASSWORD)
            page.click("button[type=submit]")
            page.wait_for_url(f"{server}/")
            yield page, problems
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
