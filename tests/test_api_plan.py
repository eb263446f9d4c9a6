"""The sample-size planner: exact McNemar power against enumeration, the
API (GET /api/v1/plan) and the comparison page's section."""

from __future__ import annotations

import functools
import math

import pytest
from django.test import Client
from scipy import stats

from runs.compare.planner import PlanInput, mcnemar_power, plan_compute
from runs.models import Dataset, Project, Result, Run, Score
from runs.records.versions import results_changed
from tests.comparisons import paired_runs
from tests.factories import arithmetic_items, make_dataset

URL = "/api/v1/plan"


@functools.cache
def exact_p(successes: int, trials: int) -> float:
    """scipy's two-sided exact binomial test at 1/2, each outcome computed
    once: the enumerations below ask for the same ones again and again."""
    return stats.binomtest(successes, trials, 0.5).pvalue


def enumerated_power(n: int, psi: float, delta: float, level: float) -> float:
    """Every (regressions, improvements, rest) outcome of n pairs, weighted by
    its multinomial probability, rejected when scipy's exact test says so."""
    p10, p01 = (psi - delta) / 2, (psi + delta) / 2
    total = 0.0
    for b in range(n + 1):
        for c in range(n + 1 - b):
            if b + c == 0:
                continue
            log = (
                math.lgamma(n + 1)
                - math.lgamma(b + 1)
                - math.lgamma(c + 1)
                - math.lgamma(n - b - c + 1)
            )
            weight = math.exp(log) * p10**b * p01**c * (1 - psi) ** (n - b - c)
            if exact_p(c, b + c) < level:
                total += weight
    return total


CASES = [
    (20, 0.3, 0.2, 0.05),
    (33, 0.2, 0.2, 0.05),
    (40, 0.25, 0.1, 0.025),
    (60, 0.5, -0.2, 0.0125),
    (50, 0.12, 0.06, 0.01),
    (45, 0.4, 0.3, 0.05 / 3),
]


@pytest.mark.parametrize(("n", "psi", "delta", "level"), CASES)
def test_power_is_the_exact_tests_by_enumeration(
    n: int, psi: float, delta: float, level: float
) -> None:
    expected = enumerated_power(n, psi, delta, level)
    found = mcnemar_power(items=n, discordance=psi, delta=abs(delta), level=level)
    assert found == pytest.approx(expected, abs=1e-9)


@pytest.mark.parametrize(
    ("psi", "delta", "m"), [(0.3, 0.2, 1), (0.4, 0.25, 3), (0.25, 0.15, 2)]
)
def test_items_needed_is_where_the_enumerated_power_reaches_the_target(
    psi: float, delta: float, m: int
) -> None:
    plan = plan_compute(
        PlanInput(pass_rate=0.6, delta=delta, discordance=psi, comparisons=m)
    )
    assert plan.level == pytest.approx(0.05 / m)
    assert plan.items is not None
    assert enumerated_power(plan.items, psi, delta, plan.level) >= 0.8
    assert enumerated_power(plan.items - 1, psi, delta, plan.level) < 0.8


def test_more_comparisons_need_more_items() -> None:
    one, three = (
        plan_compute(
            PlanInput(pass_rate=0.7, delta=0.05, discordance=0.2, comparisons=m)
        )
        for m in (1, 3)
    )
    assert one.items is not None and three.items is not None
    assert three.items > one.items


def test_independent_verdicts_give_the_discordance() -> None:
    plan = plan_compute(PlanInput(pass_rate=0.7, delta=-0.1, discordance=None))
    assert plan.discordance == pytest.approx(0.7 * 0.4 + 0.6 * 0.3)


@pytest.fixture
def runs(project: Project) -> tuple[Run, Run]:
    dataset: Dataset = make_dataset(project, arithmetic_items(100), name="hundred")
    return paired_runs(
        dataset, both_passed=50, regressions=4, improvements=10, both_failed=36
    )


@pytest.mark.django_db
def test_plan_without_a_comparison(victor_client: Client) -> None:
    body = victor_client.get(
        URL, {"pass_rate": 0.6, "delta": 0.2, "discordance": 0.3}
    ).json()
    assert body["level"] == 0.05 and body["comparisons"] == 1
    assert body["method"] == "mcnemar_exact_enumeration"
    assert enumerated_power(body["items"], 0.3, 0.2, 0.05) >= 0.8
    assert enumerated_power(body["items"] - 1, 0.3, 0.2, 0.05) < 0.8
    assert body["paired"] is None and body["mde"] is None


@pytest.mark.django_db
def test_plan_takes_its_defaults_from_the_comparison(
    victor_client: Client, runs: tuple[Run, Run]
) -> None:
    baseline, candidate = runs
    query = {"baseline": baseline.pk, "candidates": str(candidate.pk)}
    body = victor_client.get(URL, query).json()
    row = victor_client.get("/api/v1/compare", query).json()["scorers"][0]
    assert body["scorer"] == "exact_match" and body["candidate"] == candidate.pk
    assert body["pass_rate"] == pytest.approx(0.54)
    assert body["delta"] == pytest.approx(0.06)
    assert body["discordance"] == pytest.approx(0.14)
    assert body["comparisons"] == 1
    assert body["paired"] == 100
    assert body["mde"] == row["mde"]
    assert body["power_at_paired"] == pytest.approx(
        enumerated_power(100, 0.14, 0.06, 0.05), abs=1e-9
    )
    given = victor_client.get(URL, {**query, "delta": 0.1, "m": 4}).json()
    assert given["delta"] == 0.1 and given["level"] == pytest.approx(0.0125)


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"pass_rate": 0.6, "delta": 0.2, "discordance": 0.1}, "discordance"),
        ({"pass_rate": 0.9, "delta": 0.2}, "delta"),
        ({"pass_rate": 0.6, "delta": 0}, "delta"),
        ({"pass_rate": 0.6}, "delta"),
        ({"delta": 0.1}, "pass_rate"),
        ({"pass_rate": 0.6, "delta": 0.1, "power": 1.5}, "power"),
        ({"pass_rate": 0.6, "delta": 0.1, "m": 0}, "m"),
        ({"pass_rate": "x", "delta": 0.1}, "pass_rate"),
    ],
)
@pytest.mark.django_db
def test_impossible_plans_are_422_naming_the_parameter(
    victor_client: Client, query: dict[str, object], field: str
) -> None:
    response = victor_client.get(URL, query)
    assert response.status_code == 422
    (error,) = response.json()["detail"]
    assert error["loc"][-1] == field
    assert error["msg"]


@pytest.mark.django_db
def test_a_numeric_scorer_cannot_be_planned(
    victor_client: Client, project: Project
) -> None:
    dataset = make_dataset(project, arithmetic_items(4), name="four")
    baseline, candidate = paired_runs(
        dataset, both_passed=1, regressions=1, improvements=1, both_failed=1
    )
    Score.objects.filter(result__run=candidate).update(value=0.4)
    response = victor_client.get(
        URL, {"baseline": baseline.pk, "candidates": str(candidate.pk)}
    )
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"][-1] == "scorer"


@pytest.mark.django_db
def test_outsider_cannot_plan_from_a_project_s_comparison(
    mallory_client: Client, runs: tuple[Run, Run]
) -> None:
    baseline, candidate = runs
    response = mallory_client.get(
        URL, {"baseline": baseline.pk, "candidates": str(candidate.pk)}
    )
    assert response.status_code == 404


@pytest.mark.django_db
def test_compare_page_shows_the_planner(
    victor_client: Client, runs: tuple[Run, Run]
) -> None:
    baseline, candidate = runs
    query = {"baseline": baseline.pk, "candidates": str(candidate.pk)}
    text = victor_client.get("/compare/", query).content.decode()
    api = victor_client.get(URL, query).json()
    assert 'id="planner"' in text
    assert f'<strong id="plan-items">{api["items"]}</strong>' in text
    assert 'name="plan_delta"' in text
    asked = victor_client.get(
        "/compare/", {**query, "plan_delta": "0.1", "plan_m": "3"}
    )
    planned = victor_client.get(URL, {**query, "delta": 0.1, "m": 3}).json()
    assert (
        f'<strong id="plan-items">{planned["items"]}</strong>' in asked.content.decode()
    )


@pytest.mark.django_db
def test_compare_page_names_a_bad_planner_value(
    victor_client: Client, runs: tuple[Run, Run]
) -> None:
    baseline, candidate = runs
    response = victor_client.get(
        "/compare/",
        {"baseline": baseline.pk, "candidates": str(candidate.pk), "plan_m": "zero"},
    )
    assert response.status_code == 200
    assert 'id="plan-error"' in response.content.decode()
    assert "plan_m" in response.content.decode()


@pytest.mark.django_db
def test_results_stopped_in_flight_are_no_sample_of_the_plan(
    victor_client: Client, runs: tuple[Run, Run]
) -> None:
    baseline, candidate = runs
    # The candidate was cancelled with ten calls of both-failed items in
    # flight, and ten of both-passed ones: twenty items are no sample.
    cut = list(
        Result.objects.filter(run=candidate, item_index__gte=90).values_list(
            "pk", flat=True
        )
    ) + list(
        Result.objects.filter(run=candidate, item_index__lt=10).values_list(
            "pk", flat=True
        )
    )
    Score.objects.filter(result_id__in=cut).delete()
    Result.objects.filter(pk__in=cut).update(
        status=Result.Status.CANCELLED, output=None
    )
    results_changed(candidate)
    query = {"baseline": baseline.pk, "candidates": str(candidate.pk)}
    body = victor_client.get(URL, query).json()
    assert body["paired"] == 80
    assert body["pass_rate"] == pytest.approx(44 / 80)  # 40 + 4 regressions
    assert body["discordance"] == pytest.approx(14 / 80)
    assert body["delta"] == pytest.approx(6 / 80)
