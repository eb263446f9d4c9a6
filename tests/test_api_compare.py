"""GET /api/v1/compare: the comparison of runs as JSON, scoped to the user."""

from __future__ import annotations

import pytest
from django.test import Client
from scipy import stats

from runs.models import Dataset, Project, Run
from tests.comparisons import make_run, paired_runs
from tests.factories import arithmetic_items, make_dataset

URL = "/api/v1/compare"
KEYS = {
    "scorer",
    "candidate",
    "paired",
    "skipped",
    "baseline_pass_rate",
    "candidate_pass_rate",
    "delta",
    "delta_ci",
    "both_passed",
    "regressions",
    "improvements",
    "both_failed",
    "test",
    "p_value",
    "p_value_adjusted",
    "verdict",
}

pytestmark = pytest.mark.django_db


@pytest.fixture
def runs(dataset: Dataset) -> tuple[Run, Run]:
    return paired_runs(
        dataset, both_passed=3, regressions=1, improvements=4, both_failed=2
    )


def test_comparison_has_the_documented_keys(
    victor_client: Client, runs: tuple[Run, Run]
) -> None:
    baseline, candidate = runs

    response = victor_client.get(
        URL, {"baseline": baseline.pk, "candidates": str(candidate.pk)}
    )

    assert response.status_code == 200
    body = response.json()
    assert body["baseline"] == baseline.pk
    assert body["candidates"] == [candidate.pk]
    assert body["paired_by"] == "item"
    assert body["unpaired"] == 0
    [row] = body["scorers"]
    assert set(row) >= KEYS
    assert (row["both_passed"], row["regressions"]) == (3, 1)
    assert (row["improvements"], row["both_failed"]) == (4, 2)
    assert row["p_value"] == pytest.approx(stats.binomtest(4, 5).pvalue)
    assert row["verdict"] == "no_significant_difference"
    assert len(row["delta_ci"]) == 2
    assert row["skipped"] == 0
    assert row["test"] == "mcnemar_exact"
    assert row["interval"] == "mcnemar_exact_inverted"
    assert row["ci_level"] == pytest.approx(0.95)


def test_several_candidates_are_listed_in_order(
    alice_client: Client, dataset: Dataset, runs: tuple[Run, Run]
) -> None:
    baseline, candidate = runs
    third = make_run(dataset)

    response = alice_client.get(
        URL, {"baseline": baseline.pk, "candidates": f"{third.pk}, {candidate.pk}"}
    )

    assert response.status_code == 200
    assert response.json()["candidates"] == [third.pk, candidate.pk]
    # Every item has results in two of the three runs, none in all three.
    assert response.json()["unpaired"] == 10
    assert [row["candidate"] for row in response.json()["scorers"]] == [
        third.pk,
        candidate.pk,
    ]


def test_missing_baseline_is_422_naming_it(
    alice_client: Client, runs: tuple[Run, Run]
) -> None:
    response = alice_client.get(URL, {"candidates": str(runs[1].pk)})

    assert response.status_code == 422
    assert "baseline" in str(response.json()["detail"])


@pytest.mark.parametrize("candidates", ["", "abc", "1,x", ",", "0"])
def test_bad_candidates_are_400_naming_them(
    alice_client: Client, runs: tuple[Run, Run], candidates: str
) -> None:
    response = alice_client.get(URL, {"baseline": runs[0].pk, "candidates": candidates})

    assert response.status_code == 400
    assert response.json()["field"] == "candidates"


def test_the_baseline_among_the_candidates_is_400(
    alice_client: Client, runs: tuple[Run, Run]
) -> None:
    baseline = runs[0]

    response = alice_client.get(
        URL, {"baseline": baseline.pk, "candidates": f"{baseline.pk}"}
    )

    assert response.status_code == 400
    assert response.json()["field"] == "candidates"


def test_runs_over_different_datasets_are_400(
    alice_client: Client, project: Project, runs: tuple[Run, Run]
) -> None:
    other = make_run(make_dataset(project, arithmetic_items(3), name="other"))

    response = alice_client.get(
        URL, {"baseline": runs[0].pk, "candidates": str(other.pk)}
    )

    assert response.status_code == 400
    assert response.json()["field"] == "candidates"


def test_outsider_gets_404_for_a_baseline_she_cannot_see(
    mallory_client: Client, runs: tuple[Run, Run]
) -> None:
    baseline, candidate = runs

    response = mallory_client.get(
        URL, {"baseline": baseline.pk, "candidates": str(candidate.pk)}
    )

    assert response.status_code == 404


def test_outsider_gets_404_when_one_candidate_is_not_hers(
    mallory_client: Client, other_project: Project, runs: tuple[Run, Run]
) -> None:
    hers = make_run(make_dataset(other_project, arithmetic_items(3)))

    response = mallory_client.get(
        URL, {"baseline": hers.pk, "candidates": str(runs[1].pk)}
    )

    assert response.status_code == 404


def test_anonymous_gets_401(client: Client, runs: tuple[Run, Run]) -> None:
    response = client.get(URL, {"baseline": runs[0].pk, "candidates": runs[1].pk})

    assert response.status_code == 401
