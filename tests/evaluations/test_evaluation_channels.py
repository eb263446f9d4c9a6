"""An evaluation's alert channels: chosen in the API and the form, recorded in
its history, and only ever its own project's."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from django.test import Client

from runs.alerts.services import channel_create
from runs.errors import InvalidInput
from runs.evaluations import services
from runs.evaluations.run_end import run_ended
from runs.evaluations.services import evaluation_update
from runs.models import (
    AlertChannel,
    Dataset,
    Evaluation,
    EvaluationChange,
    Membership,
    Project,
    Run,
    RunStatus,
    Target,
)
from tests.evaluations.conftest import ECHO, make_evaluation

pytestmark = pytest.mark.django_db

API = "/api/v1/evaluations"


def channel(project: Project, user: User, name: str = "team") -> AlertChannel:
    return channel_create(
        project=project,
        user=user,
        name=name,
        kind="email",
        emails=["lead@example.org"],
    ).channel


def text_of(response: object) -> str:
    html = response.content.decode()  # type: ignore[attr-defined]  # a test response
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def api_payload(project: Project, dataset: Dataset, **extra: object) -> dict:
    return {
        "project": project.pk,
        "name": "nightly",
        "dataset": dataset.pk,
        "target_kind": "python",
        "target_config": ECHO,
        "scorers": ["exact_match"],
        **extra,
    }


def test_the_api_sets_channels_and_the_history_records_them(
    bob_client: Client, project: Project, dataset: Dataset, bob: User
) -> None:
    first, second = channel(project, bob, "first"), channel(project, bob, "second")
    response = bob_client.post(
        API,
        api_payload(project, dataset, channels=[second.pk, first.pk]),
        content_type="application/json",
    )
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["channels"] == sorted([first.pk, second.pk])
    evaluation = Evaluation.objects.get(pk=body["id"])
    created = evaluation.changes.get()
    assert created.changes["channels"] == [None, sorted([first.pk, second.pk])]
    response = bob_client.patch(
        f"{API}/{evaluation.pk}",
        {"channels": [first.pk]},
        content_type="application/json",
    )
    assert response.status_code == 200, response.content
    assert response.json()["channels"] == [first.pk]
    assert list(evaluation.channels.all()) == [first]
    updated = evaluation.changes.filter(action=EvaluationChange.Action.UPDATED).get()
    assert updated.changes == {"channels": [sorted([first.pk, second.pk]), [first.pk]]}
    # Changing something else keeps them.
    response = bob_client.patch(
        f"{API}/{evaluation.pk}", {"description": "x"}, content_type="application/json"
    )
    assert response.json()["channels"] == [first.pk]


def test_the_api_refuses_a_channel_of_another_project(
    bob_client: Client,
    project: Project,
    other_project: Project,
    dataset: Dataset,
    bob: User,
    mallory: User,
) -> None:
    own, foreign = channel(project, bob), channel(other_project, mallory)
    response = bob_client.post(
        API,
        api_payload(project, dataset, channels=[own.pk, foreign.pk]),
        content_type="application/json",
    )
    assert response.status_code == 400, response.content
    assert response.json()["field"] == "channels[1]"
    assert "Elsewhere" not in response.json()["detail"]  # nothing of it shown
    assert not Evaluation.objects.exists()
    evaluation = make_evaluation(project, dataset, bob, channels=[own.pk])
    response = bob_client.patch(
        f"{API}/{evaluation.pk}",
        {"channels": [foreign.pk]},
        content_type="application/json",
    )
    assert response.status_code == 400, response.content
    assert response.json()["field"] == "channels[0]"
    assert list(evaluation.channels.all()) == [own]
    assert evaluation.changes.count() == 1  # nothing half-written


def test_the_service_names_the_channel_it_refuses(
    project: Project,
    other_project: Project,
    dataset: Dataset,
    bob: User,
    mallory: User,
) -> None:
    evaluation = make_evaluation(project, dataset, bob)
    foreign = channel(other_project, mallory)
    with pytest.raises(InvalidInput) as refused:
        evaluation_update(evaluation=evaluation, user=bob, channels=[foreign.pk])
    assert refused.value.field == "channels[0]"
    with pytest.raises(InvalidInput) as refused:
        evaluation_update(evaluation=evaluation, user=bob, channels="1")
    assert refused.value.field == "channels"


def form_data(dataset: Dataset, **extra: object) -> dict:
    return {
        "name": "release",
        "dataset": dataset.pk,
        "dataset_policy": "fixed",
        "target": "",
        "scorers": ["exact_match"],
        "baseline_policy": "previous",
        **extra,
    }


def test_the_form_offers_the_projects_channels_and_saves_them(
    bob_client: Client, project: Project, dataset: Dataset, bob: User
) -> None:
    evaluation = make_evaluation(project, dataset, bob)
    team = channel(project, bob)
    page = bob_client.get(f"/evaluations/{evaluation.pk}/edit/")
    assert page.status_code == 200
    html = page.content.decode()
    assert f'name="channels" value="{team.pk}"' in html
    response = bob_client.post(
        f"/evaluations/{evaluation.pk}/edit/",
        form_data(dataset, name="nightly", channels=[team.pk]),
    )
    assert response.status_code == 302, text_of(response)
    assert list(evaluation.channels.all()) == [team]
    updated = evaluation.changes.filter(action=EvaluationChange.Action.UPDATED).get()
    assert updated.changes["channels"] == [[], [team.pk]]
    detail = text_of(bob_client.get(f"/evaluations/{evaluation.pk}/"))
    assert "Alerts team" in detail


def test_the_form_refuses_a_channel_of_another_project_of_the_user(
    alice_client: Client,
    alice: User,
    project: Project,
    other_project: Project,
    dataset: Dataset,
    mallory: User,
) -> None:
    # Alice edits both projects: both offer their channels on a new evaluation.
    Membership.objects.create(
        project=other_project, user=alice, role=Membership.Role.EDITOR
    )
    foreign = channel(other_project, mallory)
    evaluation = make_evaluation(project, dataset, alice)
    target = Target.objects.create(
        project=project, name="echo", kind="python", config=ECHO
    )
    new = form_data(dataset, target=target.pk, channels=[foreign.pk])
    response = alice_client.post("/evaluations/new/", new)
    assert response.status_code == 200
    assert f"no alert channel {foreign.pk} in Research" in text_of(response)
    assert not Evaluation.objects.filter(name="release").exists()
    # The edit form offers the evaluation's project's channels only.
    edit = alice_client.post(
        f"/evaluations/{evaluation.pk}/edit/",
        form_data(dataset, name="nightly", channels=[foreign.pk]),
    )
    assert edit.status_code == 200
    assert "Select a valid choice" in text_of(edit)
    assert not evaluation.channels.exists()


def test_the_form_never_offers_an_outsiders_channel(
    bob_client: Client,
    project: Project,
    other_project: Project,
    dataset: Dataset,
    mallory: User,
) -> None:
    foreign = channel(other_project, mallory, "secret-team")
    page = bob_client.get("/evaluations/new/")
    assert "secret-team" not in page.content.decode()
    response = bob_client.post(
        "/evaluations/new/", form_data(dataset, channels=[foreign.pk])
    )
    assert response.status_code == 200
    assert "Select a valid choice" in text_of(response)
    assert not Evaluation.objects.exists()


def test_an_alert_that_cannot_be_handed_on_never_fails_the_runs_end(
    project: Project,
    dataset: Dataset,
    bob: User,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    evaluation = make_evaluation(
        project, dataset, bob, channels=[channel(project, bob).pk]
    )
    run = Run.objects.create(
        project=project,
        dataset=dataset,
        target_kind="python",
        evaluation=evaluation,
        status=RunStatus.COMPLETED,
    )

    def gone(**arguments: object) -> None:
        raise RuntimeError("the alerts' loop is gone")

    monkeypatch.setattr(services, "announce_later", gone)
    run_ended(run)
    assert "the alerts' loop is gone" in caplog.text
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED and not run.error
    assert run.evaluation_end == f"{run.revision}:{run.status}"
