"""A score skipped by its condition is neither passed nor failed, everywhere."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from runs.analysis.clusters import run_clusters
from runs.analysis.summary import PASS_RATE_DEFINITION, run_summary
from runs.executor.store import ResultRecord, ScoreRecord, results_write
from runs.models import Item, Project, Run
from runs.results.selectors import ResultFilters, result_filter
from runs.results.services import run_create
from tests.factories import make_dataset

SCORERS = [
    "exact_match",
    {"kind": "includes", "when": {"scorer": "exact_match", "passed": False}},
]


def stored_run(
    project: Project, rows: list[list[ScoreRecord]], *, epochs: int = 1
) -> Run:
    """A run with one succeeded result per row of scores (items reused by epoch)."""
    items = max(len(rows) // epochs, 1)
    dataset = make_dataset(
        project, [{"input": f"q{i}", "expected": "a"} for i in range(items)]
    )
    run = run_create(
        user=None,
        dataset=dataset,
        target_kind="python",
        target_config={"callable": "runs.targets.examples.echo"},
        scorers=SCORERS,
        options={"epochs": epochs},
        launch=False,
    )
    by_index = {item.index: item for item in Item.objects.filter(dataset=dataset)}
    now = timezone.now()
    records = [
        ResultRecord(
            item_id=by_index[n % items].pk,
            item_index=n % items,
            epoch=n // items,
            status="succeeded",
            output="a",
            attempts=[{"number": 1, "outcome": "ok"}],
            started_at=now,
            finished_at=now,
            scores=scores,
        )
        for n, scores in enumerate(rows)
    ]
    results_write(run.pk, records)
    return run


def exact(passed: bool) -> ScoreRecord:
    return ScoreRecord("exact_match", float(passed), passed, reason="r")


def includes(passed: bool | None, *, error: str = "") -> ScoreRecord:
    if passed is None and not error:
        return ScoreRecord(
            "includes", None, None, reason="skipped: exact_match passed", skipped=True
        )
    value = None if error else float(bool(passed))
    return ScoreRecord("includes", value, passed, reason="r", error=error)


@pytest.fixture
def run(project: Project) -> Run:
    rows = [
        [exact(True), includes(None)],
        [exact(True), includes(None)],
        [exact(True), includes(None)],
        [exact(False), includes(True)],
        [exact(False), includes(False)],
        [exact(False), includes(None, error="ValueError: boom")],
    ]
    return stored_run(project, rows)


def _scorer(run: Run, name: str) -> Any:
    return next(s for s in run_summary(run=run).scorers if s.scorer == name)


def test_skipped_scores_leave_the_pass_rate_denominator(run: Run) -> None:
    summary = _scorer(run, "includes")

    assert (summary.results, summary.skipped, summary.judged) == (6, 3, 3)
    assert summary.passed == 1
    assert summary.failed == 2  # one failed, one errored; the skipped are not
    assert summary.pass_rate == pytest.approx(1 / 3)
    assert summary.errored == 1 and summary.not_scored == 0
    assert "results - skipped" in PASS_RATE_DEFINITION


def test_a_scorer_without_skips_keeps_every_result_in_its_denominator(
    run: Run,
) -> None:
    summary = _scorer(run, "exact_match")
    assert (summary.skipped, summary.pass_rate) == (0, 0.5)


def test_a_scorer_skipped_everywhere_has_no_pass_rate(project: Project) -> None:
    run = stored_run(project, [[exact(True), includes(None)]] * 2)
    summary = _scorer(run, "includes")
    assert (summary.judged, summary.pass_rate, summary.pass_rate_ci) == (0, None, None)


def test_pass_at_k_counts_only_the_epochs_that_were_judged(project: Project) -> None:
    # Two items, three epochs: item 0 judged once (passed), item 1 judged
    # three times (passed once).
    rows = [
        [exact(False), includes(True)],  # item 0, epoch 0
        [exact(False), includes(True)],  # item 1, epoch 0
        [exact(True), includes(None)],  # item 0, epoch 1
        [exact(False), includes(False)],  # item 1, epoch 1
        [exact(True), includes(None)],  # item 0, epoch 2
        [exact(False), includes(False)],  # item 1, epoch 2
    ]
    run = stored_run(project, rows, epochs=3)
    summary = _scorer(run, "includes")

    # k = 1: item 0 is 1/1, item 1 is 1/3; k = 2: only item 1 has two trials.
    assert summary.pass_at_k[1] == pytest.approx((1 + 1 / 3) / 2)
    assert summary.pass_at_k[2] == pytest.approx(1 - (2 * 1) / (3 * 2))


def test_skipped_scores_form_no_failure_cluster(run: Run) -> None:
    clusters = run_clusters(run=run)
    reasons = [c.example for c in clusters.failed_scores]
    assert not any("skipped" in reason for reason in reasons)
    assert sum(c.count for c in clusters.failed_scores if c.scorer == "includes") == 2


def test_results_filter_by_the_skipped_verdict(run: Run) -> None:
    def indexes(verdict: str) -> list[int]:
        filters = ResultFilters.parse(
            {"scorer": "includes", "verdict": verdict}, run=run
        )
        return [r.item_index for r in result_filter(run=run, filters=filters)]

    assert indexes("skipped") == [0, 1, 2]
    assert indexes("failed") == [4]
    assert indexes("passed") == [3]
    assert indexes("errored") == [5]


def test_api_shows_skipped_scores_and_counts(alice_client: Client, run: Run) -> None:
    base = f"/api/v1/runs/{run.pk}"
    listed = alice_client.get(f"{base}/results?scorer=includes&verdict=skipped")
    assert listed.status_code == 200
    rows = listed.json()["items"]
    assert len(rows) == 3
    skipped = next(s for s in rows[0]["scores"] if s["scorer"] == "includes")
    assert skipped["skipped"] is True
    assert skipped["reason"] == "skipped: exact_match passed"
    assert skipped["passed"] is None and skipped["prompt_tokens"] is None

    summary = alice_client.get(f"{base}/summary").json()
    includes_row = next(s for s in summary["scorers"] if s["scorer"] == "includes")
    assert includes_row["skipped"] == 3
    assert includes_row["pass_rate"] == pytest.approx(1 / 3)


def test_pages_show_skipped_scores(alice_client: Client, run: Run) -> None:
    page = alice_client.get(f"/runs/{run.pk}/").content.decode()
    assert "(3 skipped)" in page
    assert "1 / 3</strong> passed" in page
