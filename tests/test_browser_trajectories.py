"""A real browser opens a result's trajectory, expands a step, and follows the
comparison's link to the runs' trajectories side by side."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.browser import manage_shell, signed_in_page

pytestmark = pytest.mark.browser

# Two runs of the first item: the second fetches another page. The fetch's
# result is markup that must stay text.
AGENT_RUNS = """
from django.utils import timezone
from runs.executor.store import ResultRecord, results_write
from runs.models import Dataset, Item, Result
from runs.results.services import run_create
from tests.trajectories.steps import model_step, store_steps, tool_step

dataset = Dataset.objects.get(name="sums")
item = Item.objects.get(dataset=dataset, index=0)
ids = []
for page in (1, 2):
    run = run_create(user=None, dataset=dataset, target_kind="python",
        target_config={"callable": "runs.targets.examples.echo"},
        scorers=["exact_match"], name=f"agent {page}", launch=False)
    now = timezone.now()
    results_write(run.pk, [ResultRecord(item_id=item.pk, item_index=0, epoch=0,
        status="succeeded", output="0", attempts=[], started_at=now,
        finished_at=now)])
    result = Result.objects.get(run=run)
    store_steps(result, [
        model_step(prompt_tokens=9, completion_tokens=3, latency_ms=40.0),
        tool_step("fetch", {"page": page}, output="<script>alert(1)</script>",
                  latency_ms=7.0),
        model_step(),
    ])
    ids.append((run.pk, result.pk))
print(",".join(f"{run}:{result}" for run, result in ids))
"""


def test_a_trajectory_opens_and_diffs_in_a_browser(server: str, tmp_path: Path) -> None:
    printed = manage_shell(tmp_path, AGENT_RUNS).strip().splitlines()[-1]
    (run_a, result_a), (run_b, _) = (
        tuple(pair.split(":")) for pair in printed.split(",")
    )
    with signed_in_page(server, viewport={"width": 1280, "height": 1000}) as (
        page,
        problems,
    ):
        dialogs: list[str] = []
        page.on(
            "dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss())
        )
        page.goto(f"{server}/runs/{run_a}/results/{result_a}/")

        assert "3 steps" in page.locator("#trajectory-totals").inner_text()
        body = page.locator("#step-1 .step-body")
        assert not body.is_visible()
        page.click("#step-1 summary")
        assert body.is_visible()
        assert "<script>alert(1)</script>" in body.inner_text()

        page.goto(f"{server}/compare/?baseline={run_a}&candidates={run_b}")
        page.click(".trajectory-diff-link")
        page.wait_for_selector("#first-divergence")
        assert "They diverge at row 1" in page.locator("#divergence").inner_text()
        assert dialogs == []
        assert problems == []


# Two agent runs over four items: the second's item 2 calls fetch for another
# page, fails on it and calls search again; every other trajectory is the same.
FOUR_ITEMS = """
from django.utils import timezone
from runs.executor.store import ResultRecord, results_write
from runs.models import Dataset, Item, Result
from runs.results.services import run_create
from tests.trajectories.steps import model_step, store_steps, tool_step

dataset = Dataset.objects.get(name="sums")
items = list(Item.objects.filter(dataset=dataset, index__lt=4).order_by("index"))
runs = []
for name in ("agent a", "agent b"):
    run = run_create(user=None, dataset=dataset, target_kind="python",
        target_config={"callable": "runs.targets.examples.echo"},
        scorers=["exact_match"], name=name, launch=False)
    now = timezone.now()
    failing = name == "agent b"
    records = [ResultRecord(item_id=item.pk, item_index=item.index, epoch=0,
        status="failed" if failing and item.index == 2 else "succeeded",
        error_kind="permanent" if failing and item.index == 2 else "",
        error_type="ToolError" if failing and item.index == 2 else "",
        error_message="gave up" if failing and item.index == 2 else "",
        output=str(item.index * 3), attempts=[], started_at=now,
        finished_at=now) for item in items]
    results_write(run.pk, records)
    for item in items:
        steps = [model_step(cost=0.001), tool_step("fetch", {"page": 1}),
                 model_step(cost=0.001)]
        if failing and item.index == 2:
            steps[1] = tool_step("fetch", {"page": 2}, error="HTTP 503 after 4 s",
                                 error_type="ToolError")
            steps.insert(2, tool_step("search", {"q": "again"}))
        store_steps(Result.objects.get(run=run, item=item), steps)
    runs.append(run.pk)
print(",".join(map(str, runs)))
"""


def test_the_comparison_of_agent_runs_leads_to_where_an_item_diverged(
    server: str, tmp_path: Path
) -> None:
    run_a, run_b = (
        manage_shell(tmp_path, FOUR_ITEMS).strip().splitlines()[-1].split(",")
    )
    with signed_in_page(server, viewport={"width": 1280, "height": 1000}) as (
        page,
        problems,
    ):
        page.goto(f"{server}/compare/?baseline={run_a}&candidates={run_b}")

        steps = page.locator('#step-table tr[data-measure="steps"]')
        assert steps.locator("td").nth(2).inner_text() == "4"  # paired items
        assert "+0.25" in steps.inner_text()  # one more step for one item in four
        row = page.locator("#item-table tbody tr", has_text="q2")
        row.locator(".trajectory-diff-link").click()
        page.wait_for_selector("#first-divergence")
        assert "They diverge at row 1" in page.locator("#divergence").inner_text()
        marker = page.locator("#first-divergence")
        assert "first divergence" in marker.inner_text()
        assert "fetch" in marker.inner_text()

        page.goto(f"{server}/runs/{run_b}/clusters/")
        cluster = page.locator("#step-clusters .step-cluster")
        assert "HTTP <n> after <n> s" in cluster.inner_text()
        cluster.get_by_role("link", name="item 2").click()
        page.wait_for_selector("#trajectory")
        assert "error" in page.locator("#step-1").inner_text()
        assert problems == []
