"""POST /api/v1/runs/{id}/rescore and GET /api/v1/runs/{id}/scoring-passes."""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from runs.models import Run, Score, ScoringPass
from runs.results.services import run_create
from tests.factories import make_dataset
from tests.mixed_results import ended_run_with_two_failures, mixed_run

API = "/api/v1"
STRICT = {
    "kind": "regex",
    "name": "strict",
    "params": {"pattern": "^[0-9]+$", "mode": "fullmatch"},
}


def post_rescore(client: Client, run: Run, **body: Any):
    return client.post(
        f"{API}/runs/{run.pk}/rescore", body, content_type="application/json"
    )


def passes(client: Client, run: Run) -> list[dict[str, Any]]:
    response = client.get(f"{API}/runs/{run.pk}/scoring-passes")
    assert response.status_code == 200
    return response.json()


def wait_for_pass(client: Client, run: Run) -> list[dict[str, Any]]:
    deadline = time.monotonic() + 30
    while (listed := passes(client, run))[-1]["status"] in ("pending", "running"):
        assert time.monotonic() < deadline, listed
        time.sleep(0.05)
    return listed


@pytest.mark.django_db(transaction=True)
def test_an_added_scorer_is_scored_in_the_background_without_the_target(
    bob_client, project, fake_openai
):
    run = ended_run_with_two_failures(project, fake_openai)
    requests = fake_openai.stats.requests

    response = post_rescore(bob_client, run, scorers=[STRICT])

    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["results"], body["added"], body["replaced"]) == (3, ["strict"], [])
    assert body["launched"] is True
    assert body["scoring_pass"]["user"] == "bob"
    assert [s["name"] for s in body["run"]["scorers"]] == ["exact_match", "strict"]
    initial, second = wait_for_pass(bob_client, run)
    assert initial["initial"] is True
    assert (second["status"], second["total"], second["scored"]) == ("completed", 3, 3)
    assert fake_openai.stats.requests == requests
    detail = bob_client.get(f"{API}/runs/{run.pk}").json()
    assert detail["score_means"] == {"exact_match": 1.0, "strict": 1.0}
    assert detail["counts"]["failed"] == 2  # results untouched


@pytest.mark.django_db(transaction=True)
def test_the_log_says_who_when_and_which_scorers_with_their_params(
    alice_client, bob_client, project, fake_openai
):
    run = ended_run_with_two_failures(project, fake_openai)
    # Before any re-score the run's own execution is shown as its first pass.
    (shown,) = passes(alice_client, run)
    assert (shown["id"], shown["initial"], shown["scored"]) == (None, True, 3)
    post_rescore(bob_client, run, scorers=[STRICT])
    wait_for_pass(bob_client, run)
    replaced = {"kind": "includes", "name": "strict", "params": {}}
    post_rescore(alice_client, run, scorers=["numeric", replaced])

    first, second, third = wait_for_pass(alice_client, run)

    assert (first["initial"], first["user"], first["status"]) == (
        True,
        None,
        "completed",
    )
    assert [s["name"] for s in first["scorers"]] == ["exact_match"]
    assert second["user"] == "bob" and third["user"] == "alice"
    assert second["scorers"] == [
        {
            "name": "strict",
            "kind": "regex",
            "params": {
                "pattern": "^[0-9]+$",
                "mode": "fullmatch",
                "ignore_case": False,
            },
        }
    ]
    # In the order the run lists them: strict (replaced in place), then numeric.
    assert [(s["name"], s["kind"]) for s in third["scorers"]] == [
        ("strict", "includes"),
        ("numeric", "numeric"),
    ]
    assert second["created_at"] <= third["created_at"]
    assert third["finished_at"] >= third["started_at"]
    stored = Run.objects.get(pk=run.pk)
    assert [(s["name"], s["kind"]) for s in stored.scorers] == [
        ("exact_match", "exact_match"),
        ("strict", "includes"),
        ("numeric", "numeric"),
    ]


@pytest.mark.django_db(transaction=True)
def test_summary_and_clusters_follow_the_new_scores(alice_client, project, fake_openai):
    run = ended_run_with_two_failures(project, fake_openai)
    before = alice_client.get(f"{API}/runs/{run.pk}/clusters").json()
    assert before["failed_score_clusters"] == 0
    never = {"kind": "regex", "name": "exact_match", "params": {"pattern": "^never$"}}

    post_rescore(alice_client, run, scorers=[never])
    wait_for_pass(alice_client, run)

    summary = alice_client.get(f"{API}/runs/{run.pk}/summary").json()
    (scorer,) = summary["scorers"]
    assert (scorer["scorer"], scorer["passed"], scorer["scored"]) == (
        "exact_match",
        0,
        3,
    )
    clusters = alice_client.get(f"{API}/runs/{run.pk}/clusters").json()
    assert clusters["failed_score_clusters"] == 1
    assert clusters["failed_scores"][0]["count"] == 3
    assert clusters["failed_scores"][0]["scorer"] == "exact_match"


@pytest.mark.django_db
def test_a_dry_run_says_what_would_change_and_writes_nothing(alice_client, dataset):
    run = mixed_run(dataset, ended=True)
    revision = run.revision
    body = post_rescore(
        alice_client,
        run,
        scorers=[{"kind": "includes", "name": "exact_match"}, "numeric"],
        dry_run=True,
    ).json()
    assert body["results"] == 4  # the succeeded results of the mixed run
    assert (body["added"], body["replaced"]) == (["numeric"], ["exact_match"])
    assert body["kind_changes"] == {"exact_match": ["exact_match", "includes"]}
    assert (body["launched"], body["scoring_pass"]) == (False, None)
    stored = Run.objects.get(pk=run.pk)
    assert stored.scorer_names == ["exact_match"]
    assert stored.revision == revision
    assert not ScoringPass.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("scorers", "field"),
    [
        ([{"kind": "regex", "params": {"pattern": "("}}], "scorers[0].params.pattern"),
        ([{"kind": "regex", "params": {}}], "scorers[0].params.pattern"),
        (["exact_match", {"kind": "no_such_kind"}], "scorers[1].kind"),
        ([{"kind": "numeric", "params": {"abs_tol": -1}}], "scorers[0].params.abs_tol"),
        (["numeric", "numeric"], "scorers[1].name"),
        ([], "scorers"),
        ([{"kind": "numeric", "name": "n" * 101}], "scorers[0].name"),
    ],
)
def test_bad_scorers_are_refused_naming_the_field_and_nothing_is_written(
    alice_client, dataset, scorers, field
):
    run = mixed_run(dataset, ended=True)
    scores = list(Score.objects.values_list("pk", "value"))

    response = post_rescore(alice_client, run, scorers=scorers)

    assert response.status_code == 400, response.content
    assert response.json()["field"].startswith(field)
    assert Run.objects.get(pk=run.pk).scorers == run.scorers
    assert not ScoringPass.objects.exists()
    assert list(Score.objects.values_list("pk", "value")) == scores


@pytest.mark.django_db
def test_a_body_that_is_not_a_scorer_list_is_422(alice_client, dataset):
    run = mixed_run(dataset, ended=True)
    response = post_rescore(alice_client, run, scorers="exact_match")
    assert response.status_code == 422


@pytest.mark.django_db
def test_a_run_still_executing_is_409_saying_why(alice_client, dataset):
    run = mixed_run(dataset)  # pending: not ended
    response = post_rescore(alice_client, run, scorers=["numeric"])
    assert response.status_code == 409
    assert "re-score it once it has ended" in response.json()["detail"]
    assert not ScoringPass.objects.exists()


@pytest.mark.django_db
def test_a_run_being_rescored_is_409_and_cannot_be_retried(alice_client, dataset):
    run = mixed_run(dataset, ended=True)
    ScoringPass.objects.create(
        run=run, status="running", heartbeat_at=timezone.now(), total=4
    )
    response = post_rescore(alice_client, run, scorers=["numeric"])
    assert response.status_code == 409
    assert "is being re-scored" in response.json()["detail"]
    retry = alice_client.post(
        f"{API}/runs/{run.pk}/retry", {}, content_type="application/json"
    )
    assert retry.status_code == 409
    assert "re-scored" in retry.json()["detail"]


@pytest.mark.django_db
def test_an_outsider_gets_404_and_a_viewer_403(mallory_client, victor_client, dataset):
    run = mixed_run(dataset, ended=True)
    assert post_rescore(mallory_client, run, scorers=["numeric"]).status_code == 404
    assert mallory_client.get(f"{API}/runs/{run.pk}/scoring-passes").status_code == 404
    assert post_rescore(victor_client, run, scorers=["numeric"]).status_code == 403
    assert victor_client.get(f"{API}/runs/{run.pk}/scoring-passes").status_code == 200
    assert not ScoringPass.objects.exists()


@pytest.mark.django_db
def test_a_run_never_rescored_lists_itself_as_its_one_pass(victor_client, dataset):
    run = mixed_run(dataset, ended=True)
    (only,) = passes(victor_client, run)
    assert (only["id"], only["initial"], only["status"]) == (None, True, "completed")
    # Four results have an output; one of their scores is a scorer error.
    assert (only["total"], only["scored"], only["errored"]) == (4, 4, 1)
    assert [s["name"] for s in only["scorers"]] == ["exact_match"]
    assert not ScoringPass.objects.exists()


@pytest.mark.django_db
def test_a_scorer_needing_expected_answers_the_dataset_lacks_is_400(
    alice_client, project
):
    dataset = make_dataset(project, [{"id": "a", "input": "hi"}], name="bare")
    run = run_create(
        user=None,
        dataset=dataset,
        target_kind="python",
        target_config={"callable": "runs.targets.examples.echo"},
        scorers=[{"kind": "regex", "params": {"pattern": "h"}}],
        launch=False,
    )
    Run.objects.filter(pk=run.pk).update(status="completed")
    response = post_rescore(alice_client, run, scorers=["exact_match"])
    assert response.status_code == 400
    assert response.json()["field"] == "scorers"
    assert "expected answer" in response.json()["detail"]
