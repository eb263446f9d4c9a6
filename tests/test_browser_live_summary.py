"""A run watched live: its progress comes first, its summary and its scoring
passes follow it as results arrive, and both are final once it has ended."""

from __future__ import annotations

import re
import time

import pytest

from tests.browser import FINAL_STATUSES, signed_in_page

pytestmark = pytest.mark.browser

SAMPLE = """() => {
    const progress = document.getElementById("run-progress");
    const summary = document.getElementById("run-summary");
    return {
        status: progress.dataset.status,
        processed: Number(summary.dataset.processed),
        progressFirst: !!(progress.compareDocumentPosition(summary)
            & Node.DOCUMENT_POSITION_FOLLOWING),
        progressAbove: progress.getBoundingClientRect().top
            < summary.getBoundingClientRect().top,
    };
}"""


def test_a_live_run_shows_progress_first_and_its_summary_follows(
    server: str,
) -> None:
    with signed_in_page(server, viewport={"width": 1280, "height": 1000}) as (
        page,
        problems,
    ):
        page.goto(f"{server}/runs/new/")
        page.select_option("#id_dataset", label="Browser / sums v1 (40 items)")
        page.select_option("#id_target", label="Browser / Demo model (demo)")
        page.fill("#id_concurrency", "1")  # 40 items of 100-300 ms: several s
        page.fill("#id_name", "followed")
        page.click("button[type=submit].primary")
        page.wait_for_url(re.compile(r"/runs/\d+/$"))

        samples = []
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            sample = page.evaluate(SAMPLE)
            samples.append(sample)
            if sample["status"] in FINAL_STATUSES:
                break
            time.sleep(0.1)
        running = [s for s in samples if s["status"] not in FINAL_STATUSES]
        assert running, "the page never showed the run going"
        assert all(s["progressFirst"] and s["progressAbove"] for s in running)
        # the summary's counts grew while the run went, not only at its end
        counts = [s["processed"] for s in running]
        assert any(0 < count < 40 for count in counts), counts
        assert counts == sorted(counts)

        page.wait_for_function(
            "() => document.getElementById('run-summary').dataset.final === 'true'"
        )
        assert page.evaluate(SAMPLE)["processed"] == 40
        assert problems == []


def test_the_run_scoring_pass_is_completed_once_a_watched_run_ends(
    server: str,
) -> None:
    with signed_in_page(server) as (page, problems):
        page.get_by_role("button", name="Start the demo run").first.click()
        page.wait_for_url(re.compile(r"/runs/\d+/$"))

        page.wait_for_function(
            "() => document.querySelector('#scoring-pass-1 .pass-status')"
            ".textContent.trim().startsWith('completed')",
            timeout=90_000,
        )
        answered = page.inner_text("#run-progress dl.counts div:first-child dd")
        scored = page.inner_text("#scoring-pass-1 .pass-scored").strip()
        assert scored == f"{answered} of {answered}"
        assert int(answered) > 0
        assert problems == []
