"""A researcher's first look at a run in a real browser: the pass rate in the
runs list, the results table's question and answer, and stepping through
the wrong answers from one result's page to the next."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import pytest

from tests.browser import signed_in_page, watch_progress

pytestmark = pytest.mark.browser

if TYPE_CHECKING:
    from playwright.sync_api import Page


def reloaded_until(page: Page, selector: str, text: str, tries: int = 100) -> str:
    """The first ``selector``'s text once it holds ``text``, reloading for it."""
    for _ in range(tries):
        found = page.locator(selector).first.inner_text()
        if text in found:
            return found
        page.reload()
    raise AssertionError(f"{selector} never showed {text!r}: {found!r}")


def test_a_researcher_reads_the_pass_rate_and_steps_through_wrong_answers(
    server: str,
) -> None:
    with signed_in_page(server, viewport={"width": 1400, "height": 1000}) as (
        page,
        problems,
    ):
        page.get_by_role("button", name="Start the demo run").first.click()
        page.wait_for_url(re.compile(r"/runs/\d+/$"))
        run_url = page.url
        watch_progress(page)

        # The runs list: the run's pass rate per scorer, beside answered calls
        # (from the figures stored just after the run ends).
        page.goto(f"{server}/")
        rates = reloaded_until(page, "td.pass-rates", "%")
        assert re.fullmatch(r"exact_match \d+\.\d%", rates.strip()), rates
        head = [t.strip() for t in page.locator("thead th").all_text_contents()]
        assert "Pass rate" in head and "Answered" in head

        # The run's results: question and expected answer on each row; its
        # wrong answers only.
        page.goto(run_url)
        # Each choice submits the filters: wait for the first page to load
        # before the second choice, or a busy machine loses it in between.
        page.select_option("#result-filters select[name=scorer]", "exact_match")
        page.wait_for_url(re.compile(r"scorer=exact_match"))
        page.select_option("#result-filters select[name=verdict]", "failed")
        page.wait_for_url(re.compile(r"verdict=failed"))
        rows = page.locator("#results tbody tr")
        wrong = rows.count()
        assert wrong >= 2, "the demo model (80% right) gets a few of 40 wrong"
        first = rows.first
        assert first.locator("td.result-input").inner_text().startswith("What is")
        assert first.locator("td.result-expected").inner_text().strip().isdigit()
        assert "Answered" in first.inner_text() and "exact_match failed" in (
            first.inner_text()
        )

        # Result to result, within the wrong answers, and back to them.
        indexes = [int(rows.nth(n).locator("td").first.inner_text()) for n in range(2)]
        first.locator("td a").first.click()
        page.wait_for_url(re.compile(r"/results/\d+/\?scorer=exact_match"))
        assert page.locator("h1").inner_text().startswith(f"Item {indexes[0]}")
        page.locator("#result-next").click()
        page.wait_for_url(re.compile(r"verdict=failed"))
        assert page.locator("h1").inner_text().startswith(f"Item {indexes[1]}")
        assert page.locator("#finish-reason").inner_text() == "not reported"
        page.locator("#result-back").click()
        page.wait_for_url(re.compile(r"verdict=failed#results$"))
        assert page.locator("#results tbody tr").count() == wrong
        assert problems == []
