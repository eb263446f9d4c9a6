"""The judges-against-people page, and the project's calibration thresholds."""

from __future__ import annotations

import json

import numpy as np
import pytest
from statsmodels.stats.inter_rater import cohens_kappa, to_table

from runs.models import Project, Run, Score
from runs.review.services import queue_create
from tests.review.builders import ended_run
from tests.review.test_labels import label_all

# The judge's verdicts (the run's exact_match is named as an llm_judge here)
# and the people's.
JUDGE = [True, False, True, False, True, False, True, False, True, False]
PEOPLE = [
    "pass",
    "pass",
    "pass",
    "fail",
    "fail",
    "fail",
    "pass",
    "fail",
    "pass",
    "pass",
]


@pytest.fixture
def judged(bob, dataset) -> Run:
    run = ended_run(dataset, passed=JUDGE)
    Score.objects.filter(result__run=run, scorer="exact_match").update(scorer="judge")
    Run.objects.filter(pk=run.pk).update(
        scorers=[{"name": "judge", "kind": "llm_judge", "params": {}}]
    )
    run.refresh_from_db()
    queue = queue_create(user=bob, run=run, name="people", raters=1)
    label_all(bob, queue, PEOPLE)
    return run


def test_the_page_shows_kappa_confusion_and_calibration(victor_client, judged):
    response = victor_client.get(f"/runs/{judged.pk}/judges/")
    assert response.status_code == 200
    html = response.content.decode()
    # Failure is the positive class: fail = 1.
    codes = np.array([[0 if v else 1 for v in JUDGE], [v == "fail" for v in PEOPLE]])
    table, _ = to_table(codes.T.astype(int))
    assert f"{cohens_kappa(table).kappa:.3f}" in html
    assert 'data-judge="judge" data-human="human:people"' in html
    assert 'data-calibrated="no"' in html  # 10 items, under the default 50
    both_fail = sum((not j) and p == "fail" for j, p in zip(JUDGE, PEOPLE, strict=True))
    assert f'<td class="num">{both_fail}</td>' in html
    # A viewer does not get the thresholds' form.
    assert "judge-thresholds" not in html


def test_an_admin_sets_the_thresholds_and_the_judge_is_calibrated(
    alice, alice_client, judged
):
    response = alice_client.get(f"/runs/{judged.pk}/judges/")
    assert 'id="judge-thresholds"' in response.content.decode()
    posted = alice_client.post(
        f"/runs/{judged.pk}/judges/thresholds/",
        {"judge_kappa_threshold": "0.0", "judge_min_items": "5"},
    )
    assert posted.status_code == 302
    project = Project.objects.get(pk=judged.project_id)
    assert (project.judge_kappa_threshold, project.judge_min_items) == (0.0, 5)
    html = alice_client.get(f"/runs/{judged.pk}/judges/").content.decode()
    assert 'data-calibrated="yes"' in html


def test_the_api_sets_the_thresholds_admins_only(
    alice_client, bob_client, mallory_client, project
):
    url = f"/api/v1/projects/{project.pk}/judge-calibration"
    kind = "application/json"
    body = json.dumps({"judge_kappa_threshold": 0.8})
    assert bob_client.patch(url, body, content_type=kind).status_code == 403
    assert mallory_client.patch(url, body, content_type=kind).status_code == 404
    response = alice_client.patch(url, body, content_type=kind)
    assert response.status_code == 200
    assert response.json() == {
        "project": project.pk,
        "judge_kappa_threshold": 0.8,
        "judge_min_items": 50,
    }
    bad = alice_client.patch(
        url, json.dumps({"judge_kappa_threshold": 1.5}), content_type=kind
    )
    assert bad.status_code == 400
    assert "judge_kappa_threshold" in bad.content.decode()
    assert Project.objects.get(pk=project.pk).judge_kappa_threshold == 0.8


def test_another_projects_run_is_hidden(mallory_client, judged):
    assert mallory_client.get(f"/runs/{judged.pk}/judges/").status_code == 404
    posted = mallory_client.post(
        f"/runs/{judged.pk}/judges/thresholds/",
        {"judge_kappa_threshold": "0.0", "judge_min_items": "5"},
    )
    assert posted.status_code == 404
