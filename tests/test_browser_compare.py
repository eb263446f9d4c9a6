"""A real browser: tick two runs in the runs list, compare them, read the verdicts;
and from a run's page, the runs to compare it with arrive in place (htmx)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.browser import manage_shell, signed_in_page

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


def test_tick_two_runs_and_compare_them(server: str, tmp_path: Path) -> None:
    manage_shell(tmp_path, RUNS)
    with signed_in_page(server, viewport={"width": 1400, "height": 1000}) as (
        page,
        problems,
    ):
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
