"""The targets page: list and create form."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from runs.models import Project, Target
from tests.factories import set_bound_secret


@pytest.fixture
def openai_key(alice: User, project: Project) -> None:
    """The secret the form's targets name, bound to their host."""
    set_bound_secret(
        project, alice, "OPENAI_API_KEY", "sk-x", url="https://api.example.org"
    )


def _target(project: Project, **changes: object) -> dict:
    data: dict[str, object] = {
        "project": project.pk,
        "name": "gpt",
        "kind": "openai_chat",
        "openai_chat__base_url": "https://api.example.org/v1",
        "openai_chat__model": "m-1",
        "openai_chat__api_key_secret": "OPENAI_API_KEY",
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


def test_targets_page_offers_the_fields_and_example_of_each_kind(
    bob_client: Client, project: Project
) -> None:
    page = bob_client.get(reverse("runs:target_list")).content.decode()

    assert 'name="openai_chat__base_url"' in page
    assert 'name="openai_chat__api_key_secret"' in page
    assert 'name="demo__accuracy"' in page and 'max="1"' in page
    assert 'name="python__callable"' in page
    assert re.search(r'value="openai_chat" id="id_kind_\d+" required checked', page)
    assert "&quot;model&quot;: &quot;gpt-4o-mini&quot;" in page  # the example
    assert 'name="config"' not in page  # no JSON box


def test_targets_page_hides_other_projects_targets(
    mallory_client: Client, project: Project
) -> None:
    Target.objects.create(project=project, name="secret-sauce", kind="demo", config={})

    page = mallory_client.get(reverse("runs:target_list")).content.decode()

    assert "secret-sauce" not in page


def test_create_target_stores_it(
    bob_client: Client, project: Project, openai_key: None
) -> None:
    response = bob_client.post(reverse("runs:target_list"), _target(project))

    assert response.status_code == 302
    target = Target.objects.get(name="gpt")
    assert target.config["model"] == "m-1"
    assert target.config["api_key_secret"] == "OPENAI_API_KEY"


def test_create_target_takes_the_chosen_kinds_fields_only(
    bob_client: Client, project: Project
) -> None:
    data = _target(
        project,
        kind="demo",
        demo__accuracy="0.5",
        demo__max_latency_ms="10",
        demo__min_latency_ms="0",
        openai_chat__temperature="99",  # another kind's field: ignored
    )

    response = bob_client.post(reverse("runs:target_list"), data)

    assert response.status_code == 302
    target = Target.objects.get(name="gpt")
    assert target.kind == "demo"
    assert target.config == {
        "min_latency_ms": 0,
        "max_latency_ms": 10,
        "accuracy": 0.5,
        "transient_error_rate": 0.03,
    }


def test_create_target_shows_a_config_error_on_its_field(
    bob_client: Client, project: Project
) -> None:
    data = _target(project)
    del data["openai_chat__model"]

    response = bob_client.post(reverse("runs:target_list"), data)

    assert response.status_code == 200
    errors = response.context["form"].errors
    assert "field 'config.model': is required" in errors["openai_chat__model"][0]
    assert not Target.objects.exists()


def test_create_target_shows_a_bound_error_on_its_field(
    bob_client: Client, project: Project
) -> None:
    data = _target(project, openai_chat__temperature="3")

    response = bob_client.post(reverse("runs:target_list"), data)

    assert response.status_code == 200
    errors = response.context["form"].errors["openai_chat__temperature"]
    assert "must be between 0 and 2" in errors[0]


def test_create_target_refuses_a_secret_value_where_a_name_belongs(
    bob_client: Client, project: Project
) -> None:
    data = _target(project, openai_chat__api_key_secret="sk-123 456")

    response = bob_client.post(reverse("runs:target_list"), data)

    assert response.status_code == 200
    assert "must be a name" in str(response.context["form"].errors)
    assert not Target.objects.exists()


def test_create_target_rejects_bad_json_in_a_free_form_parameter(
    bob_client: Client, project: Project
) -> None:
    data = _target(project, openai_chat__extra_body="{not json")

    response = bob_client.post(reverse("runs:target_list"), data)

    assert response.status_code == 200
    assert "openai_chat__extra_body" in response.context["form"].errors
    assert not Target.objects.exists()


def test_create_target_keeps_free_form_json(
    bob_client: Client, project: Project, openai_key: None
) -> None:
    data = _target(project, openai_chat__extra_body='{"seed": 7}')

    bob_client.post(reverse("runs:target_list"), data)

    assert Target.objects.get().config["extra_body"] == {"seed": 7}


def test_create_target_reports_a_duplicate_name(
    bob_client: Client, project: Project, openai_key: None
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


def test_create_target_at_loopback_says_how_the_operator_allows_it(
    bob_client: Client, project: Project, settings: Any
) -> None:
    settings.EVALSITE_TARGET_ALLOW = ["public"]  # the shipped default
    data = _target(project, openai_chat__base_url="http://127.0.0.1:8765/v1")

    response = bob_client.post(reverse("runs:target_list"), data)

    assert response.status_code == 200
    error = response.context["form"].errors["openai_chat__base_url"][0]
    assert "refuses connections to 127.0.0.1" in error
    assert "EVALSITE_TARGET_ALLOW" in error and "loopback" in error
    assert not Target.objects.exists()


def test_create_target_at_a_metadata_address_says_it_is_never_allowed(
    bob_client: Client, project: Project, settings: Any
) -> None:
    settings.EVALSITE_TARGET_ALLOW = ["*", "0.0.0.0/0", "private"]
    data = _target(project, openai_chat__base_url="http://169.254.169.254/v1")

    response = bob_client.post(reverse("runs:target_list"), data)

    error = response.context["form"].errors["openai_chat__base_url"][0]
    assert "never allowed" in error
    assert "EVALSITE_TARGET_ALLOW" not in error  # no operator can allow it
    assert not Target.objects.exists()


def test_a_textarea_parameter_is_stored_with_unix_line_breaks(
    bob_client: Client, project: Project, openai_key: None
) -> None:
    # Browsers send a textarea's line breaks as CRLF.
    data = _target(
        project,
        openai_chat__system_prompt="Be brief.\r\nAnswer with a number.",
        openai_chat__prompt_template="Q: {input}\r\nA:",
    )

    response = bob_client.post(reverse("runs:target_list"), data)

    assert response.status_code == 302
    config = Target.objects.get(name="gpt").config
    assert config["system_prompt"] == "Be brief.\nAnswer with a number."
    assert config["prompt_template"] == "Q: {input}\nA:"


def test_creating_a_target_says_so(
    bob_client: Client, project: Project, openai_key: None
) -> None:
    response = bob_client.post(
        reverse("runs:target_list"), _target(project), follow=True
    )

    assert "The target &#x27;gpt&#x27; is created." in response.content.decode()


def test_targets_list_tells_targets_apart_by_their_distinguishing_values(
    victor_client: Client, project: Project
) -> None:
    for name, model, url in (
        ("first", "m-small", "https://one.example.org/v1"),
        ("second", "m-large", "http://user:pw@127.0.0.1:8001/v1?key=k"),
    ):
        Target.objects.create(
            project=project,
            name=name,
            kind="openai_chat",
            config={
                "base_url": url,
                "model": model,
                "temperature": 0.3,
                "api_key_secret": "MY_KEY",
                "system_prompt": "Be brief.",
            },
        )

    page = victor_client.get(reverse("runs:target_list")).content.decode()
    summaries = re.findall(r'<summary class="cell-text">([^<]*)</summary>', page)

    assert summaries == [
        "model=m-small, base_url=one.example.org, temperature=0.3",
        "model=m-large, base_url=127.0.0.1:8001, temperature=0.3",
    ]
