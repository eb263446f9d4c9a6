"""The evaluation API: saved, changed with a history, triggered with a key,
and never seen or used from another project."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from runs.models import Dataset, Evaluation, Project, Run, Target
from runs.projects.services import api_key_create
from tests.evaluations.conftest import ECHO, finish, make_evaluation
from tests.factories import arithmetic_items, make_dataset

pytestmark = pytest.mark.django_db

API = "/api/v1/evaluations"


def bearer(user: User) -> dict[str, str]:
    _key, plain = api_key_create(user=user, name="ci")
    return {"HTTP_AUTHORIZATION": f"Bearer {plain}"}


def payload(project: Project, dataset: Dataset, **extra: Any) -> dict[str, Any]:
    return {
        "project": project.pk,
        "name": "nightly",
        "dataset": dataset.pk,
        "target_kind": "python",
        "target_config": ECHO,
        "scorers": ["exact_match"],
        "options": {"concurrency": 2},
        **extra,
    }


def test_an_editor_saves_an_evaluation(
    bob_client: Client, project: Project, dataset: Dataset
) -> None:
    response = bob_client.post(
        API,
        payload(project, dataset, pass_rate_floors={"exact_match": 0.8}),
        content_type="application/json",
    )
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["name"] == "nightly"
    assert body["options"]["concurrency"] == 2
    assert body["scorers"][0]["name"] == "exact_match"
    assert body["pass_rate_floors"] == {"exact_match": 0.8}
    assert body["baseline_policy"] == "previous"
    evaluation = Evaluation.objects.get(pk=body["id"])
    [change] = evaluation.changes.all()
    assert change.action == "created" and change.user.username == "bob"


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"options": {"concurrency": 0}}, "options.concurrency"),
        ({"scorers": []}, "scorers"),
        ({"baseline_policy": "fixed"}, "baseline_run"),
        ({"baseline_policy": "sometimes"}, "baseline_policy"),
        ({"pass_rate_floors": {"exact_match": 1.5}}, "pass_rate_floors.exact_match"),
        ({"pass_rate_floors": {"judge": 0.5}}, "pass_rate_floors.judge"),
        ({"dataset_policy": "newest"}, "dataset_policy"),
    ],
)
def test_a_bad_evaluation_is_refused_naming_its_field(
    bob_client: Client,
    project: Project,
    dataset: Dataset,
    extra: dict[str, Any],
    field: str,
) -> None:
    response = bob_client.post(
        API, payload(project, dataset, **extra), content_type="application/json"
    )
    assert response.status_code == 400, response.content
    assert response.json()["field"] == field
    assert not Evaluation.objects.exists()


def test_a_change_is_recorded_with_who_and_what(
    bob_client: Client, alice: User, evaluation: Evaluation
) -> None:
    response = bob_client.patch(
        f"{API}/{evaluation.pk}",
        {"options": {"concurrency": 3}, "dataset_policy": "latest"},
        content_type="application/json",
    )
    assert response.status_code == 200, response.content
    history = bob_client.get(f"{API}/{evaluation.pk}/history").json()["items"]
    assert [h["action"] for h in history] == ["updated", "created"]
    changes = history[0]["changes"]
    assert changes["dataset_policy"] == ["fixed", "latest"]
    assert changes["options"][0]["concurrency"] == 8
    assert changes["options"][1]["concurrency"] == 3
    assert set(changes) == {"dataset_policy", "options"}
    assert history[0]["user"] == "bob"


def test_a_viewer_reads_but_cannot_write(
    victor_client: Client, evaluation: Evaluation
) -> None:
    assert victor_client.get(f"{API}/{evaluation.pk}").status_code == 200
    assert victor_client.get(API).json()["count"] == 1
    for response in (
        victor_client.patch(
            f"{API}/{evaluation.pk}", {"name": "x"}, content_type="application/json"
        ),
        victor_client.delete(f"{API}/{evaluation.pk}"),
        victor_client.post(f"{API}/{evaluation.pk}/runs", {}, "application/json"),
        victor_client.post(
            f"{API}/{evaluation.pk}/schedules",
            {"cron": "* * * * *"},
            content_type="application/json",
        ),
    ):
        assert response.status_code == 403, response.content
    assert not Run.objects.exists()


def test_the_trigger_starts_a_run_with_a_key_and_answers_its_id(
    client: Client, bob: User, evaluation: Evaluation
) -> None:
    response = client.post(
        f"{API}/{evaluation.pk}/runs", {}, "application/json", **bearer(bob)
    )
    assert response.status_code == 201, response.content
    body = response.json()
    run = Run.objects.get(pk=body["run"])
    assert run.evaluation_id == evaluation.pk
    assert run.evaluation_trigger == "api"
    assert run.created_by == bob
    assert run.target_config == ECHO
    assert body["baseline"] is None and body["compare_url"] is None
    assert body["url"].endswith(f"/runs/{run.pk}/")
    assert body["api_url"].endswith(f"/api/v1/runs/{run.pk}")


def test_the_trigger_runs_a_candidate_against_the_previous_run(
    client: Client, bob: User, project: Project, dataset: Dataset
) -> None:
    target = Target.objects.create(
        project=project,
        name="chat",
        kind="openai_chat",
        config={"base_url": "http://127.0.0.1:9/v1", "model": "current"},
    )
    evaluation = make_evaluation(
        project, dataset, bob, target=target, target_kind=None, target_config=None
    )
    headers = bearer(bob)
    first = client.post(
        f"{API}/{evaluation.pk}/runs", {}, "application/json", **headers
    )
    finish(Run.objects.get(pk=first.json()["run"]))
    response = client.post(
        f"{API}/{evaluation.pk}/runs",
        {"target_config": {"model": "candidate"}},
        "application/json",
        **headers,
    )
    assert response.status_code == 201, response.content
    body = response.json()
    run = Run.objects.get(pk=body["run"])
    assert run.target_config["model"] == "candidate"
    assert run.target_config["base_url"] == "http://127.0.0.1:9/v1"
    assert body["baseline"] == first.json()["run"]
    assert f"baseline={body['baseline']}" in body["compare_url"]


def test_another_projects_member_can_neither_see_nor_trigger(
    client: Client, mallory: User, mallory_client: Client, evaluation: Evaluation
) -> None:
    headers = bearer(mallory)
    assert client.get(f"{API}/{evaluation.pk}", **headers).status_code == 404
    assert client.get(API, **headers).json()["count"] == 0
    answers = [
        client.post(f"{API}/{evaluation.pk}/runs", {}, "application/json", **headers),
        mallory_client.patch(
            f"{API}/{evaluation.pk}", {"name": "x"}, content_type="application/json"
        ),
        mallory_client.delete(f"{API}/{evaluation.pk}"),
        mallory_client.get(f"{API}/{evaluation.pk}/history"),
    ]
    assert [a.status_code for a in answers] == [404, 404, 404, 404]
    assert not Run.objects.exists()
    assert Evaluation.objects.filter(name="nightly").exists()


def test_an_evaluation_cannot_use_another_projects_rows(
    bob_client: Client,
    bob: User,
    project: Project,
    dataset: Dataset,
    other_project: Project,
    mallory: User,
) -> None:
    theirs = Target.objects.create(
        project=other_project, name="t", kind="python", config=ECHO
    )
    their_data = make_dataset(other_project, arithmetic_items(3))
    for extra in ({"target": theirs.pk}, {"dataset": their_data.pk}):
        body = payload(project, dataset) | extra
        response = bob_client.post(API, body, content_type="application/json")
        assert response.status_code == 404, response.content
    evaluation = make_evaluation(project, dataset, bob)
    response = bob_client.post(
        f"{API}/{evaluation.pk}/runs", {"target": theirs.pk}, "application/json"
    )
    assert response.status_code == 404
    assert not Run.objects.exists()


def test_a_schedule_is_added_and_removed_through_the_api(
    bob_client: Client, evaluation: Evaluation
) -> None:
    response = bob_client.post(
        f"{API}/{evaluation.pk}/schedules",
        {"cron": "0 3 * * 1-5", "timezone": "Europe/Paris"},
        content_type="application/json",
    )
    assert response.status_code == 201, response.content
    schedule_id = response.json()["id"]
    read = bob_client.get(f"{API}/{evaluation.pk}").json()
    assert [s["cron"] for s in read["schedules"]] == ["0 3 * * 1-5"]
    bad = bob_client.post(
        f"{API}/{evaluation.pk}/schedules",
        {"cron": "0 3 * *"},
        content_type="application/json",
    )
    assert bad.status_code == 400 and bad.json()["field"] == "cron"
    gone = bob_client.delete(f"{API}/{evaluation.pk}/schedules/{schedule_id}")
    assert gone.status_code == 204
    actions = [c.action for c in evaluation.changes.all()]
    assert actions == ["unscheduled", "scheduled", "created"]
