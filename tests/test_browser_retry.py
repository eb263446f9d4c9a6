"""A real browser filters a live run's results to the items still pending."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_browser import (  # noqa: F401  (server is a fixture)
    CHROMIUM_ARGS,
    PASSWORD,
    ROOT,
    USERNAME,
    chromium_path,
    server,
)

pytestmark = pytest.mark.browser

# Every answer takes 20 s: the run stays live while the page is looked at.
SLOW = """
from runs.models import Target
Target.objects.filter(name="Demo model").update(config={
    "min_latency_ms": 20000, "max_latency_ms": 20000, "accuracy": 1,
    "transient_error_rate": 0})
"""


def make_demo_target_slow(tmp_path: Path) -> None:
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {"DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE"}
    }
    env["EVALSITE_DATA_DIR"] = str(tmp_path / "data")  # the server's database
    manage = [sys.executable, str(ROOT / "manage.py")]
    subprocess.run([*manage, "shell", "-c", SLOW], env=env, cwd=ROOT, check=True)


def test_filter_a_live_runs_results_to_pending(
    server: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    executable = chromium_path()
    sync_api = pytest.importorskip("playwright.sync_api")
    make_demo_target_slow(tmp_path)
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=executable, args=CHROMIUM_ARGS
        )
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            problems: list[str] = []
            page.on("pageerror", lambda error: problems.append(str(error)))
            page.goto(f"{server}/login/")
            page.fill("#id_username", USERNAME)
            page.fill("#id_password", PASSWORD)
            page.click("button[type=submit]")
            page.wait_for_url(f"{server}/")

            page.goto(f"{server}/runs/new/")
            page.select_option("#id_dataset", label="Browser / sums v1 (40 items)")
            page.select_option("#id_target", label="Browser / Demo model (demo)")
            page.fill("#id_concurrency", "3")
            page.click("button[type=submit].primary")
            page.wait_for_url(re.compile(r"/runs/\d+/$"))

            # The executor's heartbeat says what it holds; the page shows it live.
            page.wait_for_function(
                "() => /40 pending, 3 in flight/"
                ".test(document.getElementById('run-left').textContent)"
            )
            page.select_option("#result-filters select[name=status]", "pending")
            page.wait_for_url(re.compile(r"\?status=pending"))

            rows = page.locator("#items-left tbody tr")
            assert rows.count() == 40
            assert rows.first.locator("td").nth(1).inner_text() == "q0"
            assert "pending" in rows.first.inner_text()
            status = page.locator("#run-progress").get_attribute("data-status")
            assert status == "running"
            if shot := os.environ.get("EVALSITE_SCREENSHOT"):
                page.screenshot(path=shot, full_page=True)
            assert problems == []
        finally:
            browser.close()
