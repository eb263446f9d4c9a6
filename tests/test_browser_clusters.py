"""A real browser on a run's failure clusters: reached from the run page, compared
with a baseline run chosen in place, each cluster with its links."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.browser import manage_shell, signed_in_page

pytestmark = pytest.mark.browser

# Two runs over the seeded dataset, their results stored as the executor
# stores them, every other item of the 40 a success: the candidate has 6
# rate-limit errors (its baseline 2) and 3 failing verdicts; both have ended.
# Prints the ids of both.
RUNS = """
from runs.results import services
from runs.executor.store import run_finish
from runs.models import Dataset
from tests.factories import store_outcomes

dataset = Dataset.objects.get(name="sums")

def rate(n):
    rid = f"req_{n:03d}a{n * 7919:08x}"
    message = f"HTTP 429: rate limited (request id {rid}), retry in {n}s"
    return {"error": ("transient", "HTTP429", message)}

def run(outcomes, name):
    run = services.run_create(
        user=None, dataset=dataset, target_kind="python",
        target_config={"callable": "runs.targets.examples.echo"},
        scorers=["exact_match"], name=name, launch=False,
    )
    run = store_outcomes(run, outcomes + [{}] * (40 - len(outcomes)))
    run_finish(run.pk, cancelled=False)  # ended: its clusters can be retried
    return run

baseline = run([rate(n) for n in range(2)], "baseline")
verdicts = [
    {"scores": [("exact_match", False, f"expected '{n}', got 'x'")]} for n in range(3)
]
candidate = run([rate(n + 10) for n in range(6)] + verdicts, "candidate")
print(baseline.pk, candidate.pk)
"""


def test_a_runs_clusters_in_a_browser_and_one_retried(
    server: str, tmp_path: Path
) -> None:
    baseline, candidate = map(int, manage_shell(tmp_path, RUNS).split()[-2:])
    with signed_in_page(server, viewport={"width": 1280, "height": 900}) as (
        page,
        problems,
    ):
        page.goto(f"{server}/runs/{candidate}/")
        page.click("text=Open the failure clusters")
        page.wait_for_url(f"{server}/runs/{candidate}/clusters/")
        errors = page.locator("#error-clusters article.cluster")
        assert errors.count() == 1
        text = errors.first.inner_text()
        assert "HTTP429" in text and "6 results" in text
        assert "req_<id>" in text
        scores = page.locator("#score-clusters article.cluster")
        assert scores.count() == 1
        assert "exact_match" in scores.first.inner_text()
        retry = errors.first.get_by_role("link", name="Retry")
        key = errors.first.get_attribute("data-cluster")
        assert retry.get_attribute("href") == (
            f"/runs/{candidate}/retry/?cluster={key}"
        )

        # Choosing the baseline reloads the page against it.
        page.select_option("select[name=baseline]", str(baseline))
        page.wait_for_url(f"{server}/runs/{candidate}/clusters/?baseline={baseline}")
        change = page.locator("#error-clusters [data-change]").first
        assert change.inner_text() == "grown"
        assert "baseline 2" in page.locator("#error-clusters").inner_text()
        if shot := os.environ.get("EVALSITE_SCREENSHOT_CLUSTERS"):
            page.screenshot(path=shot, full_page=True)

        # The first item links to its result.
        errors.first.locator("a code").first.click()
        page.wait_for_url(f"{server}/runs/{candidate}/results/*/")

        # Retry the error cluster inside the run: confirm, then the same
        # rows are rewritten and the cluster is gone.
        page.goto(f"{server}/runs/{candidate}/clusters/")
        before = page.request.get(f"{server}/api/v1/runs/{candidate}").json()
        errors.first.get_by_role("link", name="Retry").click()
        page.wait_for_url(f"{server}/runs/{candidate}/retry/*")
        assert "6 results" in page.locator("#retry-plan").inner_text()
        page.get_by_role("button", name="Retry 6 items").click()
        page.wait_for_url(f"{server}/runs/{candidate}/")
        after = before
        for _ in range(100):
            after = page.request.get(f"{server}/api/v1/runs/{candidate}").json()
            if after["status"] not in ("pending", "running"):
                break
            page.wait_for_timeout(100)
        assert after["status"] != "running", after
        counts, earlier = after["counts"], before["counts"]
        assert counts["failed"] == 0, after
        assert counts["total"] == earlier["total"]
        assert counts["succeeded"] == earlier["succeeded"] + 6
        page.goto(f"{server}/runs/{candidate}/clusters/")
        assert page.locator("#error-clusters article.cluster").count() == 0
        assert problems == []
