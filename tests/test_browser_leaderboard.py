"""A real browser: tick three runs in the runs list, press Rank, read the ranks."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.browser import manage_shell, signed_in_page

pytestmark = pytest.mark.browser

# Three finished runs over the seeded dataset: "best" and "close" pass 38 and
# 37 of the 40 items, "worst" 5.
RUNS = """
from runs.models import Dataset
from tests.comparisons import add_result, finish, make_run

dataset = Dataset.objects.get(name="sums")
passes = {"best": 38, "close": 37, "worst": 5}
for name, count in passes.items():
    run = make_run(dataset, name=name)
    for item in dataset.items.order_by("index"):
        add_result(run, item, {"exact_match": float(item.index < count)})
    finish(run)
"""


def test_tick_three_runs_and_rank_them(server: str, tmp_path: Path) -> None:
    manage_shell(tmp_path, RUNS)
    with signed_in_page(server, viewport={"width": 1400, "height": 1000}) as (
        page,
        problems,
    ):
        for name in ("best", "close", "worst"):
            row = page.locator("table.data tbody tr", has_text=name)
            row.get_by_role("checkbox").check()
        page.get_by_role("button", name="Rank").click()
        page.wait_for_url(re.compile(r"/leaderboard/\?runs=\d+%2C\d+%2C\d+"))

        rows = page.locator("table.standings tbody tr")
        assert rows.count() == 3
        ranks = [rows.nth(i).locator("td.rank").inner_text() for i in range(3)]
        names = [rows.nth(i).locator("td").nth(1).inner_text() for i in range(3)]
        assert ranks == ["1=", "1=", "3"]
        assert names[0].startswith("best") and names[2].startswith("worst")
        assert "Cochran" in page.locator(".omnibus").inner_text()
        if shot := os.environ.get("EVALSITE_SCREENSHOT"):
            page.screenshot(path=shot, full_page=True)
        assert not problems
