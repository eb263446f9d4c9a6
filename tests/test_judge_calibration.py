"""LLM judges against people: calibration of a run's judge against its
human: scores, the judge-agreement API, and what the gate, the comparison
page and the leaderboard say of an uncalibrated judge."""

from __future__ import annotations

import io
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client
from django.urls import reverse
from statsmodels.stats.inter_rater import cohens_kappa, to_table

from runs.models import Dataset, Project, Run
from runs.review.calibration import judge_calibration, uncalibrated_judges
from tests.comparisons import add_result, finish, make_run
from tests.factories import arithmetic_items, make_dataset

JUDGE = "llm_judge"
HUMAN = "human:spot-check"
ITEMS = 80


@pytest.fixture
def items(project: Project) -> Dataset:
    return make_dataset(project, arithmetic_items(ITEMS), name="qa")


def judged_run(
    dataset: Dataset,
    judge: list[float],
    people: list[float | None],
    *,
    name: str = "run",
) -> Run:
    """A finished run with an llm_judge and exact_match, and people's
    verdicts where ``people`` has one."""
    run = make_run(dataset, scorers=[JUDGE, "exact_match"], name=name)
    rows = zip(dataset.items.order_by("index"), judge, people, strict=False)
    for item, j, p in rows:
        outcomes = {JUDGE: j, "exact_match": 1.0}
        if p is not None:
            outcomes[HUMAN] = p
        add_result(run, item, outcomes)
    return finish(run)


def agreeing(n: int, flips: int, *, seed: int = 0) -> tuple[list[float], list[float]]:
    """People's verdicts and a judge's that differ on ``flips`` of them."""
    rng = np.random.default_rng(seed)
    people = [float(x) for x in rng.random(n) < 0.5]
    judge = list(people)
    for i in rng.choice(n, flips, replace=False):
        judge[i] = 1.0 - judge[i]
    return judge, people


def test_a_scorer_that_is_no_judge_has_no_calibration(items: Dataset) -> None:
    run = judged_run(items, *agreeing(ITEMS, 0))
    assert judge_calibration(run, "exact_match") is None


def test_a_judge_without_people_is_not_calibrated(items: Dataset) -> None:
    judge, _ = agreeing(ITEMS, 0)
    run = judged_run(items, judge, [None] * ITEMS)

    found = judge_calibration(run, JUDGE)
    assert found is not None and found.human is None
    assert not found.calibrated
    assert "no people's verdicts" in found.gap


def test_a_judge_that_agrees_with_people_is_calibrated(items: Dataset) -> None:
    judge, people = agreeing(ITEMS, 4)
    run = judged_run(items, judge, people)

    found = judge_calibration(run, JUDGE)
    assert found is not None and found.calibrated and found.gap == ""
    assert found.human == HUMAN
    assert found.agreement is not None and found.agreement.items == ITEMS
    table = to_table(np.column_stack([judge, people]).astype(int), bins=[0, 1, 2])
    assert found.agreement.kappa.value == pytest.approx(cohens_kappa(table[0]).kappa)


def test_the_project_sets_the_threshold_and_the_minimum(
    items: Dataset, project: Project
) -> None:
    judge, people = agreeing(ITEMS, 4)
    run = judged_run(items, judge, people)
    Project.objects.filter(pk=project.pk).update(judge_min_items=ITEMS + 1)
    run.refresh_from_db()
    found = judge_calibration(run, JUDGE)
    assert found is not None and not found.calibrated
    assert f"fewer than the {ITEMS + 1} required" in found.gap

    Project.objects.filter(pk=project.pk).update(
        judge_min_items=10, judge_kappa_threshold=0.95
    )
    run.refresh_from_db()
    found = judge_calibration(run, JUDGE)
    assert found is not None and "under the threshold 0.95" in found.gap


def test_only_results_people_labelled_count(items: Dataset) -> None:
    judge, people = agreeing(ITEMS, 0)
    labelled: list[float | None] = [*people[:30], *([None] * (ITEMS - 30))]
    run = judged_run(items, judge, labelled)

    found = judge_calibration(run, JUDGE)
    assert found is not None and found.agreement is not None
    assert found.agreement.items == 30
    assert "fewer than the 50 required" in found.gap


# -- the API ----------------------------------------------------------------------


def test_the_api_gives_each_judge_against_each_human(
    items: Dataset, alice_client: Client
) -> None:
    judge, people = agreeing(ITEMS, 20, seed=3)
    run = judged_run(items, judge, people)

    response = alice_client.get(f"/api/v1/runs/{run.pk}/judge-agreement")

    assert response.status_code == 200
    body = response.json()
    assert (body["run"], body["kappa_threshold"], body["min_items"]) == (
        run.pk,
        0.6,
        50,
    )
    [row] = body["judges"]
    assert (row["judge"], row["human"], row["items"]) == (JUDGE, HUMAN, ITEMS)
    table = to_table(np.column_stack([judge, people]).astype(int), bins=[0, 1, 2])[0]
    assert row["kappa"] == pytest.approx(cohens_kappa(table).kappa)
    low, high = row["kappa_interval"]
    assert low <= row["kappa"] <= high
    assert row["confusion"] == {
        "both_fail": table[0, 0],
        "judge_fails_people_pass": table[0, 1],
        "judge_passes_people_fail": table[1, 0],
        "both_pass": table[1, 1],
    }
    assert row["calibrated"] is (row["kappa"] >= 0.6)
    assert row["direction"] in ("stricter", "laxer", "even")


def test_the_api_says_when_a_run_has_no_people(
    items: Dataset, alice_client: Client
) -> None:
    judge, _ = agreeing(ITEMS, 0)
    run = judged_run(items, judge, [None] * ITEMS)

    [row] = alice_client.get(f"/api/v1/runs/{run.pk}/judge-agreement").json()["judges"]
    assert row["human"] is None and row["calibrated"] is False
    assert row["kappa"] is None and row["confusion"] is None


def test_another_projects_run_is_not_found(
    items: Dataset, mallory_client: Client, victor_client: Client
) -> None:
    run = judged_run(items, *agreeing(ITEMS, 0))

    response = mallory_client.get(f"/api/v1/runs/{run.pk}/judge-agreement")
    assert response.status_code == 404
    assert HUMAN not in response.content.decode()
    # A viewer of the project may read it.
    assert (
        victor_client.get(f"/api/v1/runs/{run.pk}/judge-agreement").status_code == 200
    )


def test_the_api_refuses_an_anonymous_caller(items: Dataset, client: Client) -> None:
    run = judged_run(items, *agreeing(ITEMS, 0))
    assert client.get(f"/api/v1/runs/{run.pk}/judge-agreement").status_code == 401


# -- the gate, the comparison page and the leaderboard --------------------------


@pytest.fixture
def poorly_judged(items: Dataset) -> tuple[Run, Run]:
    """A baseline and an equal candidate whose judge disagrees with people on
    a third of the items."""
    judge, people = agreeing(ITEMS, ITEMS // 3, seed=5)
    baseline = judged_run(items, judge, [None] * ITEMS, name="baseline")
    candidate = judged_run(items, judge, people, name="candidate")
    return baseline, candidate


@pytest.fixture
def well_judged(items: Dataset) -> tuple[Run, Run]:
    judge, people = agreeing(ITEMS, 2, seed=6)
    baseline = judged_run(items, judge, [None] * ITEMS, name="baseline")
    candidate = judged_run(items, judge, people, name="candidate")
    return baseline, candidate


def evalcompare(baseline: Run, candidate: Run, *extra: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command(
            "evalcompare",
            str(baseline.pk),
            str(candidate.pk),
            "--user",
            "alice",
            *extra,
            stdout=out,
            stderr=err,
        )
    except SystemExit as exc:
        return int(exc.code or 0), out.getvalue()
    return 0, out.getvalue()


def test_the_gate_says_a_verdict_rests_on_an_uncalibrated_judge(
    poorly_judged: tuple[Run, Run],
) -> None:
    code, out = evalcompare(*poorly_judged)

    assert code == 0  # no difference: the judge alone does not fail it
    assert "rests on the LLM judge llm_judge, not calibrated against people" in out
    assert "under the threshold 0.60" in out
    assert "gate passed (--fail-on worse)" in out


def test_require_calibrated_fails_the_gate(poorly_judged: tuple[Run, Run]) -> None:
    code, out = evalcompare(*poorly_judged, "--require-calibrated")

    assert code == 3
    assert "gate failed (--fail-on worse, --require-calibrated): llm_judge" in out
    assert "exact_match" not in out.splitlines()[-1]


def test_require_calibrated_passes_a_calibrated_judge(
    well_judged: tuple[Run, Run],
) -> None:
    code, out = evalcompare(*well_judged, "--require-calibrated", "--json")

    assert code == 0
    gate = json.loads(out)["gate"]
    assert gate["uncalibrated_judges"] == {} and gate["failed"] is False


def test_the_gate_json_names_the_uncalibrated_judges(
    poorly_judged: tuple[Run, Run],
) -> None:
    code, out = evalcompare(*poorly_judged, "--require-calibrated", "--json")

    gate = json.loads(out)["gate"]
    assert code == 3 and gate["failed"] is True
    assert list(gate["uncalibrated_judges"]) == [JUDGE]


def test_the_gate_reports_name_the_uncalibrated_judge(
    poorly_judged: tuple[Run, Run], tmp_path: Path
) -> None:
    report, junit = tmp_path / "gate.md", tmp_path / "gate.xml"
    evalcompare(
        *poorly_judged,
        "--require-calibrated",
        "--report",
        str(report),
        "--junit",
        str(junit),
    )

    assert "not calibrated against people" in report.read_text()
    assert "fails the gate: --require-calibrated" in report.read_text()
    cases = {
        case.get("name"): case for case in ET.parse(junit).getroot().iter("testcase")
    }
    failure = cases[JUDGE].find("failure")
    assert failure is not None and failure.get("type") == "uncalibrated_judge"
    assert cases["exact_match"].find("failure") is None


def compare_page(client: Client, baseline: Run, candidate: Run) -> str:
    url = reverse("runs:compare")
    response = client.get(url, {"baseline": baseline.pk, "candidates": candidate.pk})
    assert response.status_code == 200
    return response.content.decode()


def test_the_comparison_page_says_the_judge_is_not_calibrated(
    poorly_judged: tuple[Run, Run], well_judged: tuple[Run, Run], alice_client: Client
) -> None:
    page = compare_page(alice_client, *poorly_judged)
    assert 'id="judge-calibration"' in page
    assert "under the threshold 0.60" in page

    assert 'id="judge-calibration"' not in compare_page(alice_client, *well_judged)


def test_the_leaderboard_says_the_judge_is_not_calibrated(
    poorly_judged: tuple[Run, Run], alice_client: Client
) -> None:
    runs = ",".join(str(run.pk) for run in poorly_judged)
    response = alice_client.get(reverse("runs:leaderboard"), {"runs": runs})

    page = response.content.decode()
    assert response.status_code == 200
    assert 'id="judge-calibration"' in page
    assert 'data-scorer="llm_judge"' in page


def test_notes_name_only_judges(poorly_judged: tuple[Run, Run]) -> None:
    notes = uncalibrated_judges(list(poorly_judged), ["exact_match", JUDGE])
    assert [note.scorer for note in notes] == [JUDGE]


def test_the_gate_takes_the_baselines_people_when_the_candidate_has_none(
    items: Dataset, alice: User
) -> None:
    judge, people = agreeing(ITEMS, 2, seed=8)
    baseline = judged_run(items, judge, people, name="baseline")
    candidate = judged_run(items, judge, [None] * ITEMS, name="candidate")

    code, out = evalcompare(baseline, candidate, "--require-calibrated")
    assert code == 0 and "not calibrated" not in out


def test_the_compare_and_leaderboard_apis_name_the_uncalibrated_judge(
    poorly_judged: tuple[Run, Run], well_judged: tuple[Run, Run], alice_client: Client
) -> None:
    baseline, candidate = poorly_judged
    compared = alice_client.get(
        "/api/v1/compare", {"baseline": baseline.pk, "candidates": candidate.pk}
    ).json()
    ranked = alice_client.get(
        "/api/v1/leaderboard", {"runs": f"{baseline.pk},{candidate.pk}"}
    ).json()
    assert list(compared["uncalibrated_judges"]) == [JUDGE]
    assert "under the threshold 0.60" in ranked["uncalibrated_judges"][JUDGE]

    good_baseline, good_candidate = well_judged
    calibrated = alice_client.get(
        "/api/v1/compare",
        {"baseline": good_baseline.pk, "candidates": good_candidate.pk},
    ).json()
    assert calibrated["uncalibrated_judges"] == {}
