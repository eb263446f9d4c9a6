"""/api/v1/targets: create (never with secrets), list, read."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.http import HttpResponse
from django.test import Client

from runs.models import Project, Target
from runs.targets.services import target_create
from tests.factories import set_bound_secret

pytestmark = pytest.mark.django_db

API = "/api/v1"
CONFIG = {"base_url": "http://127.0.0.1:9/v1", "model": "m"}


def create(client: Client, project: Project, **fields: object) -> HttpResponse:
    payload = {"project": project.pk, "name": "gpt", "kind": "openai_chat"}
    return client.post(
        f"{API}/targets",
        {**payload, "config": CONFIG, **fields},
        content_type="application/json",
    )


@pytest.fixture
def target(project: Project, alice: User) -> Target:
    return target_create(
        project=project, user=alice, name="stored", kind="openai_chat", config=CONFIG
    )


@pytest.mark.parametrize("persona", ["alice_client", "bob_client"])
def test_editor_creates_a_target(
    request: pytest.FixtureRequest, alice: User, project: Project, persona: str
) -> None:
    set_bound_secret(project, alice, "OPENAI_API_KEY", "sk-x", url=CONFIG["base_url"])
    response = create(
        request.getfixturevalue(persona),
        project,
        config={**CONFIG, "api_key_secret": "OPENAI_API_KEY"},
    )

    assert response.status_code == 201
    body = response.json()
    assert (body["project"], body["name"], body["kind"]) == (
        project.pk,
        "gpt",
        "openai_chat",
    )
    assert body["config"]["api_key_secret"] == "OPENAI_API_KEY"
    assert body["config"]["model"] == "m"
    assert Target.objects.filter(pk=body["id"], project=project).exists()


def test_secret_in_config_is_refused(alice_client: Client, project: Project) -> None:
    response = create(alice_client, project, config={**CONFIG, "api_key": "sk-123"})

    assert response.status_code == 400
    assert response.json()["field"] == "config.api_key"
    assert "sk-123" not in response.content.decode()
    assert not Target.objects.exists()


def test_bad_config_names_the_field(alice_client: Client, project: Project) -> None:
    response = create(alice_client, project, config={"base_url": "ftp://x"})

    assert response.status_code == 400
    assert response.json()["field"] == "config.base_url"


def test_unknown_kind_is_refused(alice_client: Client, project: Project) -> None:
    response = create(alice_client, project, kind="telepathy")

    assert response.status_code == 400
    assert response.json()["field"] == "kind"


def test_duplicate_name_is_a_conflict(
    alice_client: Client, project: Project, target: Target
) -> None:
    response = create(alice_client, project, name=target.name)

    assert response.status_code == 409
    assert Target.objects.count() == 1


def test_viewer_cannot_create_a_target(victor_client: Client, project: Project) -> None:
    response = create(victor_client, project)

    assert response.status_code == 403
    assert not Target.objects.exists()


def test_outsider_cannot_create_in_the_project(
    mallory_client: Client, project: Project
) -> None:
    response = create(mallory_client, project)

    assert response.status_code == 404
    assert not Target.objects.exists()


def test_anonymous_cannot_create_a_target(client: Client, project: Project) -> None:
    assert create(client, project).status_code == 401


@pytest.mark.parametrize("persona", ["alice_client", "bob_client", "victor_client"])
def test_members_list_and_read_targets(
    request: pytest.FixtureRequest, target: Target, persona: str
) -> None:
    client = request.getfixturevalue(persona)

    listing = client.get(f"{API}/targets")
    detail = client.get(f"{API}/targets/{target.pk}")

    assert [t["id"] for t in listing.json()["items"]] == [target.pk]
    assert detail.status_code == 200
    assert detail.json()["config"]["base_url"] == CONFIG["base_url"]


def test_list_filters_by_project_and_kind(
    alice_client: Client, target: Target, project: Project
) -> None:
    url = f"{API}/targets?project={project.pk}"

    same_kind = alice_client.get(f"{url}&kind=openai_chat").json()
    other_kind = alice_client.get(f"{url}&kind=python").json()

    assert same_kind["count"] == 1
    assert other_kind["count"] == 0


def test_outsider_never_sees_the_projects_targets(
    mallory_client: Client, target: Target
) -> None:
    listing = mallory_client.get(f"{API}/targets")
    filtered = mallory_client.get(f"{API}/targets?project={target.project_id}")
    detail = mallory_client.get(f"{API}/targets/{target.pk}")

    assert listing.json() == {"items": [], "count": 0}
    assert filtered.json() == {"items": [], "count": 0}
    assert detail.status_code == 404


def test_anonymous_cannot_read_targets(client: Client, target: Target) -> None:
    assert client.get(f"{API}/targets/{target.pk}").status_code == 401
