"""A real browser: tick two runs in the runs list, compare them, read the verdicts;
and from a run's page, the runs to compare it with arrive in place (htmx)."""

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

# Two finished runs over the seeded dataset: the candidate passes 30 of the 40
# items, the baseline 10 (each failing item of the candidate passes in neither).
RUNS = """
from runs.models import Dataset
from tests.comparisons import add_result, finish, make_run

dataset = Dataset.objects.get(name="sums")
baseline = make_run(dataset, name="before")
candidate = make_run(dataset, name="after")
for item in dataset.items.order_by("index"):
    add_result(baseline, item, {"exact_match": float(item.index < 10)})
    add_result(candidate, item, {"exact_match": float(item.index < 30)})
finish(baseline)
finish(candidate)
"""


def seed_runs(tmp_path: Path) -> None:
    """Store the runs in the server's database (the fixture's data directory)."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {"DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE"}
    }
    env["EVALSITE_DATA_DIR"] = str(tmp_path / "data")
    subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "shell", "-c", RUNS],
        env=env,
        cwd=ROOT,
        check=True,
    )


def test_tick_two_runs_and_compare_them(
    server: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    executable = chromium_path()
    sync_api = pytest.importorskip("playwright.sync_api")
    seed_runs(tmp_path)
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=executable, args=CHROMIUM_ARGS
        )
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            problems: list[str] = []
            page.on("pageerror", lambda error: problems.append(str(error)))
            page.on(
                "console",
                lambda message: (
                    message.type == "error" and problems.append(message.text)
                ),
            )
            page.goto(f"{server}/login/")
            page.fill("#id_username", USERNAME)
            page.fill("#id_password", PASSWORD)
            page.click("button[type=submit]")
            page.wait_for_url(f"{server}/")

            for name in ("before", "after"):
                row = page.locator("table.data tbody tr", has_text=name)
                row.get_by_role("checkbox").check()
            page.get_by_role("button", name="Compare").click()
            page.wait_for_url(re.compile(r"/compare/\?baseline=\d+&candidates=\d+"))

            table = page.locator("#verdict-table")
            assert table.is_visible()
            verdict = table.locator("tbody tr .verdict")
            assert verdict.inner_text() == "better"
            assert "+0.500" in table.inner_text()
            if shot := os.environ.get("EVALSITE_SCREENSHOT"):
                page.screenshot(path=shot, full_page=True)

            # The improvements link lists the 20 items that now pass.
            table.locator("tbody tr td a").nth(1).click()
            page.wait_for_url(re.compile(r"change=improvements"))
            assert page.locator("#item-table tbody tr").count() == 20

            # From the run's page: the runs to compare with arrive in place.
            page.get_by_role("link", name="before", exact=True).first.click()
            page.wait_for_url(re.compile(r"/runs/\d+/$"))
            page.wait_for_selector("#compare-choices")
            page.get_by_role("link", name="Compare with this run").click()
            page.wait_for_url(re.compile(r"/compare/"))
            assert page.locator("#verdict-table .verdict").inner_text() == "better"
            assert problems == []
        finally:
            browser.close()
