"""Against a baseline, a shrunk cluster says where its results went: a cluster
that shrank because its items now time out is no improvement."""

from __future__ import annotations

import pytest
from django.test import Client

from runs.analysis.cluster_moves import CLUSTER, MISSING, NO_ERROR, PASSED
from runs.analysis.clusters import run_clusters
from runs.models import Dataset, Project, Run
from tests.analysis.realistic_failures import humaneval_failures
from tests.factories import arithmetic_items, echo_run, make_dataset, store_outcomes

pytestmark = pytest.mark.django_db

TIMEOUT = "timed out after 10 s (wall time); killed"
WRONG = humaneval_failures()[:14]  # AssertionError in the tests, varied
QUOTA = {"error": ("quota", "HTTP429", "HTTP 429: quota exceeded (3 requests)")}


def _code(passed: bool, reason: str) -> dict:
    return {"scores": [("code_exec", passed, reason)]}


@pytest.fixture
def dataset(project: Project) -> Dataset:
    return make_dataset(project, arithmetic_items(16))


@pytest.fixture
def baseline(dataset: Dataset) -> Run:
    # 12 wrong answers, then two items whose calls ran out of quota.
    return store_outcomes(
        echo_run(dataset), [_code(False, r) for r in WRONG[:12]] + [QUOTA] * 2
    )


@pytest.fixture
def run(dataset: Dataset) -> Run:
    # Of the 12: 9 now pass, 3 now time out; item 12 now succeeds, item 13
    # is not in the run; items 14 and 15 are new wrong answers.
    outcomes = [_code(True, "check(f) passed")] * 9 + [_code(False, TIMEOUT)] * 3
    outcomes += [_code(True, "check(f) passed")]
    run = store_outcomes(echo_run(dataset), outcomes)
    return store_outcomes(run, [_code(False, r) for r in WRONG[12:14]], offset=14)


def test_a_shrunk_cluster_says_which_results_pass_and_which_moved(
    run: Run, baseline: Run
) -> None:
    clusters = run_clusters(run=run, baseline=baseline)
    timeout, wrong = clusters.failed_scores[:2]
    assert (wrong.pattern, wrong.count, wrong.baseline_count) == (
        "AssertionError in the tests",
        2,
        12,
    )
    assert (wrong.change, wrong.fewer) == ("shrunk", 10)
    assert [(m.to, m.count, m.key, m.pattern) for m in wrong.moves] == [
        (PASSED, 9, "", ""),
        (CLUSTER, 3, timeout.key, "timed out after <n> s (wall time); killed"),
    ]
    assert timeout.change == "new" and timeout.moves == []


def test_a_vanished_error_cluster_says_where_its_results_went(
    run: Run, baseline: Run
) -> None:
    [quota] = run_clusters(run=run, baseline=baseline).errors
    assert (quota.change, quota.baseline_count) == ("vanished", 2)
    assert [(m.to, m.count) for m in quota.moves] == [(MISSING, 1), (NO_ERROR, 1)]


def test_without_a_baseline_nothing_moved(run: Run) -> None:
    assert all(not c.moves for c in run_clusters(run=run).failed_scores)


def test_the_api_documents_and_returns_the_moves(
    alice_client: Client, run: Run, baseline: Run
) -> None:
    body = alice_client.get(
        f"/api/v1/runs/{run.pk}/clusters", {"baseline": baseline.pk}
    ).json()
    timeout, wrong = body["failed_scores"][:2]
    assert wrong["moves"] == [
        {"to": "passed", "count": 9, "key": "", "pattern": ""},
        {
            "to": "cluster",
            "count": 3,
            "key": timeout["key"],
            "pattern": "timed out after <n> s (wall time); killed",
        },
    ]
    schema = alice_client.get("/api/v1/openapi.json").json()["components"]["schemas"]
    assert "moves" in schema["ClusterOut"]["properties"]
    assert "timeout" in schema["ClusterOut"]["properties"]["moves"]["description"]


def test_the_page_says_where_a_shrunk_clusters_results_went(
    alice_client: Client, run: Run, baseline: Run
) -> None:
    page = alice_client.get(
        f"/runs/{run.pk}/clusters/", {"baseline": baseline.pk}
    ).content.decode()
    text = " ".join(page.split())
    assert "10 fewer; of the baseline's 12:" in text
    assert '<span data-move="passed">9 now pass</span>' in text
    assert "3 now in <code" in text and "timed out after &lt;n&gt; s" in text
