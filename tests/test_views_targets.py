"""The targets page: list and create form."""

from __future__ import annotations

import json

from django.test import Client
from django.urls import reverse

from runs.models import Project, Target


def _target(project: Project, **changes: object) -> dict:
    data: dict[str, object] = {
        "project": project.pk,
        "name": "gpt",
        "kind": "openai_chat",
        "config": json.dumps(
            {
                "base_url": "https://api.example.org/v1",
                "model": "m-1",
                "api_key_secret": "OPENAI_API_KEY",
            }
        ),
    }
    data.update(changes)
    return data


def test_targets_page_lists_targets_with_their_config(
    victor_client: Client, project: Project
) -> None:
    Target.objects.create(
        project=project,
        name="local",
        kind="openai_chat",
        config={"base_url": "http://x/v1", "model": "m", "api_key_secret": "MY_KEY"},
    )

    response = victor_client.get(reverse("runs:target_list"))

    assert response.status_code == 200
    page = response.content.decode()
    assert "local" in page and "MY_KEY" in page
    assert "Creating a target needs the editor role" in page


def test_targets_page_offers_an_example_config_per_kind(
    bob_client: Client, project: Project
) -> None:
    page = bob_client.get(reverse("runs:target_list")).content.decode()

    assert 'id="example-openai_chat"' in page
    assert "&quot;api_key_secret&quot;: &quot;OPENAI_API_KEY&quot;" in page
    assert 'id="example-demo"' in page
    assert '<option value="openai_chat" selected>' in page


def test_targets_page_hides_other_projects_targets(
    mallory_client: Client, project: Project
) -> None:
    Target.objects.create(project=project, name="secret-sauce", kind="demo", config={})

    page = mallory_client.get(reverse("runs:target_list")).content.decode()

    assert "secret-sauce" not in page


def test_create_target_stores_it(bob_client: Client, project: Project) -> None:
    response = bob_client.post(reverse("runs:target_list"), _target(project))

    assert response.status_code == 302
    target = Target.objects.get(name="gpt")
    assert target.config["model"] == "m-1"
    assert target.config["api_key_secret"] == "OPENAI_API_KEY"


def test_create_target_shows_a_config_error_naming_the_field(
    bob_client: Client, project: Project
) -> None:
    response = bob_client.post(
        reverse("runs:target_list"),
        _target(project, config=json.dumps({"base_url": "http://x/v1"})),
    )

    assert response.status_code == 200
    assert "config.model" in response.context["form"].errors["config"][0]
    assert not Target.objects.exists()


def test_create_target_refuses_a_stored_secret(
    bob_client: Client, project: Project
) -> None:
    config = {"base_url": "http://x/v1", "model": "m", "api_key": "sk-123"}

    response = bob_client.post(
        reverse("runs:target_list"), _target(project, config=json.dumps(config))
    )

    assert response.status_code == 200
    assert "secrets are never stored" in response.content.decode()
    assert "sk-123" not in str(Target.objects.values_list("config", flat=True))


def test_create_target_rejects_bad_json(bob_client: Client, project: Project) -> None:
    response = bob_client.post(
        reverse("runs:target_list"), _target(project, config="{not json")
    )

    assert response.status_code == 200
    assert "is not JSON" in response.context["form"].errors["config"][0]


def test_create_target_reports_a_duplicate_name(
    bob_client: Client, project: Project
) -> None:
    bob_client.post(reverse("runs:target_list"), _target(project))

    response = bob_client.post(reverse("runs:target_list"), _target(project))

    assert response.status_code == 200
    assert "exists" in response.context["form"].errors["name"][0]
    assert Target.objects.count() == 1


def test_create_target_is_forbidden_to_a_viewer(
    victor_client: Client, project: Project
) -> None:
    response = victor_client.post(reverse("runs:target_list"), _target(project))

    assert response.status_code == 403
    assert not Target.objects.exists()


def test_create_target_in_an_outsiders_project_is_not_found(
    mallory_client: Client, project: Project
) -> None:
    response = mallory_client.post(reverse("runs:target_list"), _target(project))

    assert response.status_code == 404
    assert not Target.objects.exists()
