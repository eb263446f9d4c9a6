"""A real browser re-scores an ended run and sees the pass in the run's log."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.browser import manage_shell, signed_in_page

pytestmark = pytest.mark.browser

FAST = """
from runs.models import Target
Target.objects.filter(name="Demo model").update(config={
    "min_latency_ms": 0, "max_latency_ms": 5, "accuracy": 0.5,
    "transient_error_rate": 0})
"""


def test_rescore_a_run_from_its_page(server: str, tmp_path: Path) -> None:
    manage_shell(tmp_path, FAST)
    with signed_in_page(server, viewport={"width": 1280, "height": 1000}) as (
        page,
        problems,
    ):
        page.goto(f"{server}/runs/new/")
        page.select_option("#id_dataset", label="Browser / sums v1 (40 items)")
        page.select_option("#id_target", label="Browser / Demo model (demo)")
        page.click("button[type=submit].primary")
        page.wait_for_url(re.compile(r"/runs/\d+/$"))
        run_url = page.url
        page.wait_for_function(
            "() => ['completed', 'completed_with_errors'].includes("
            "document.getElementById('run-progress')?.dataset.status)"
        )
        page.goto(run_url)

        page.click("#run-rescore-link")
        page.check("input[name=scorers][value=regex]")
        page.fill("#id_as__regex", "any answer")
        page.fill("#id_regex__pattern", ".")
        page.click("#rescore-form button[type=submit].primary")
        page.wait_for_url(run_url)

        # Running, then (polled, and the page reloaded) completed with counts.
        page.wait_for_function(
            "() => /completed/.test(document.querySelector("
            "'#scoring-pass-2 .pass-status')?.textContent)",
            timeout=30_000,
        )
        assert page.locator("#scoring-pass-2 .pass-scored").inner_text() == "40 of 40"
        assert "tester" in page.locator("#scoring-pass-2").inner_text()
        assert "any answer" in page.locator("body").inner_text()
        assert problems == []
