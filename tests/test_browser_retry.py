"""A real browser filters a live run's results to the items still pending."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.browser import manage_shell, signed_in_page

pytestmark = pytest.mark.browser

# Every answer takes 20 s: the run stays live while the page is looked at.
SLOW = """
from runs.models import Target
Target.objects.filter(name="Demo model").update(config={
    "min_latency_ms": 20000, "max_latency_ms": 20000, "accuracy": 1,
    "transient_error_rate": 0})
"""


def test_filter_a_live_runs_results_to_pending(server: str, tmp_path: Path) -> None:
    manage_shell(tmp_path, SLOW)
    with signed_in_page(
        server, viewport={"width": 1280, "height": 1000}, console=None
    ) as (page, problems):
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
