"""The run summary's charts in a real browser, under the enforced CSP."""

from __future__ import annotations

import re

import pytest

from tests.browser import signed_in_page, watch_progress

pytestmark = pytest.mark.browser

CHARTS_DRAWN = """() => {
    const box = document.getElementById("run-charts");
    if (!box || box.hidden) return 0;
    return [...box.querySelectorAll("canvas")]
        .filter((c) => Chart.getChart(c) && c.width > 0).length;
}"""


def test_charts_are_drawn_when_a_watched_run_ends_and_on_reload(server: str) -> None:
    with signed_in_page(server, viewport={"width": 1280, "height": 1000}) as (
        page,
        problems,
    ):
        page.get_by_role("button", name="Start the demo run").first.click()
        page.wait_for_url(re.compile(r"/runs/\d+/$"))

        watch_progress(page)
        # The summary section is brought up to date in place, charts and all.
        page.wait_for_function(
            "() => document.getElementById('run-summary').dataset.final === 'true'"
        )
        page.wait_for_function(f"() => ({CHARTS_DRAWN})() >= 4")
        # every result of the run is counted once it has ended
        assert " / 40</strong> passed" in page.inner_html("#run-summary")

        page.reload()
        page.wait_for_function(f"() => ({CHARTS_DRAWN})() >= 4")
        assert page.locator("#run-charts canvas").count() >= 4
        assert problems == []
