"""A real browser against a real server: a run started from the form, watched live.

The server (``tests.browser``) is Daphne in a subprocess with its own SQLite
file, so the run executes on the server's loop exactly as in production and
progress reaches the page over the websocket.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from runs.consumers import SNAPSHOT_ROWS
from tests.browser import FINAL_STATUSES, signed_in_page, watch_progress

pytestmark = pytest.mark.browser


def test_a_run_started_from_the_form_progresses_live(
    server: str, tmp_path: Path
) -> None:
    with signed_in_page(
        server,
        viewport={"width": 1280, "height": 1000},
        console=lambda message: message.text.startswith("htmx:"),
    ) as (page, problems):
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
        ids = "rows => rows.map(row => Number(row.dataset.resultId))"
        stored = page.eval_on_selector_all("#results tbody tr", ids)
        live = page.eval_on_selector_all("#live-rows > tr", ids)
        assert len(set(stored)) == 40
        # The socket's first message holds the newest SNAPSHOT_ROWS results
        # stored when it connected, and every result stored after it comes on
        # top: all 40 when it connected before 20 were stored; on a slower
        # machine, the newest of them, never fewer than 20, with no gap and
        # no repeat, newest first.
        assert SNAPSHOT_ROWS <= len(live) <= 40
        assert live == sorted(stored, reverse=True)[: len(live)]
        live_rows = page.locator("#live-rows > tr")
        assert (
            live_rows.first.locator("td").count() == 9
        )  # a whole row, with the input and expected answer
        assert problems == []


def test_start_the_demo_run_starts_it_and_shows_it_live(server: str) -> None:
    with signed_in_page(server, console=None) as (page, problems):
        page.get_by_role("button", name="Start the demo run").first.click()
        page.wait_for_url(re.compile(r"/runs/\d+/$"))

        assert "Demo run" in page.inner_text("h1")
        seen = watch_progress(page)
        assert seen[-1][0] == 40  # every item of the seeded dataset
        assert seen[-1][1] in FINAL_STATUSES
        assert problems == []
