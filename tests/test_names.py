"""A name longer than its column holds is refused, naming the field, on every
path that creates or renames (runs/records/names.py): never stored over-long (SQLite
would keep it whole) and never a server error (PostgreSQL refuses it)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from runs.errors import InvalidInput
from runs.models import ApiKey, Dataset, Project, Run, Target
from runs.projects.services import api_key_create, project_create
from runs.records.names import max_length
from runs.targets.services import target_create, target_update

pytestmark = pytest.mark.django_db

API = "/api/v1"
CONFIG = {"base_url": "http://127.0.0.1:9/v1", "model": "m"}
ECHO = {"callable": "runs.targets.examples.echo"}


def _too_long(model: type, column: str = "name") -> str:
    return "n" * (max_length(model, column) + 1)


def _post(client: Client, path: str, body: dict[str, Any]) -> Any:
    return client.post(f"{API}{path}", body, content_type="application/json")


def _refused(response: Any, field: str = "name") -> None:
    # 422: the API's schema bounds the field; 400: the service does.
    assert response.status_code in (400, 422), response.content
    assert field in response.content.decode()


def test_api_target_with_a_long_name(alice_client: Client, project: Project) -> None:
    response = _post(
        alice_client,
        "/targets",
        {
            "project": project.pk,
            "name": _too_long(Target),
            "kind": "openai_chat",
            "config": CONFIG,
        },
    )

    _refused(response)
    assert not Target.objects.exists()


def test_api_run_with_a_long_name(alice_client: Client, dataset: Dataset) -> None:
    response = _post(
        alice_client,
        "/runs",
        {
            "dataset": dataset.pk,
            "target_kind": "python",
            "target_config": ECHO,
            "scorers": ["includes"],
            "name": _too_long(Run),
        },
    )

    _refused(response)
    assert not Run.objects.exists()


def test_api_project_with_a_long_name(alice_client: Client) -> None:
    response = _post(alice_client, "/projects", {"name": _too_long(Project)})

    _refused(response)
    assert not Project.objects.filter(name=_too_long(Project)).exists()


def test_api_dataset_with_a_long_name(alice_client: Client, project: Project) -> None:
    response = _post(
        alice_client,
        "/datasets",
        {
            "project": project.pk,
            "name": _too_long(Dataset),
            "items": [{"input": "a"}],
        },
    )

    _refused(response)
    assert not Dataset.objects.exists()


def test_api_rename_of_a_target_to_a_long_name(
    alice_client: Client, alice: User, project: Project
) -> None:
    target = target_create(
        project=project, user=alice, name="t", kind="openai_chat", config=CONFIG
    )

    response = alice_client.patch(
        f"{API}/targets/{target.pk}",
        {"name": _too_long(Target)},
        content_type="application/json",
    )

    _refused(response)
    assert Target.objects.get(pk=target.pk).name == "t"


def test_api_upload_naming_a_long_expected_field(
    alice_client: Client, project: Project
) -> None:
    field = "e" * (max_length(Dataset, "expected_field") + 1)
    upload = io.BytesIO(json.dumps({"input": "a", field: "b"}).encode())
    upload.name = "long.jsonl"

    response = alice_client.post(
        f"{API}/datasets/upload",
        {"project": project.pk, "expected_field": field, "file": upload},
    )

    _refused(response, "expected_field")
    assert not Dataset.objects.exists()


# -- the services, which every surface goes through ------------------------------


def test_project_create_refuses_a_long_name(alice: User) -> None:
    with pytest.raises(InvalidInput) as refused:
        project_create(name=_too_long(Project), owner=alice)

    assert refused.value.field == "name"
    assert not Project.objects.exists()


def test_target_update_refuses_a_long_name(alice: User, project: Project) -> None:
    target = target_create(
        project=project, user=alice, name="t", kind="openai_chat", config=CONFIG
    )

    with pytest.raises(InvalidInput) as refused:
        target_update(target=target, user=alice, name=_too_long(Target))

    assert refused.value.field == "name"
    assert Target.objects.get(pk=target.pk).name == "t"


def test_api_key_create_refuses_a_long_name(alice: User) -> None:
    with pytest.raises(InvalidInput) as refused:
        api_key_create(user=alice, name=_too_long(ApiKey))

    assert refused.value.field == "name"
    assert not ApiKey.objects.exists()


def test_a_name_at_the_limit_is_kept_whole(alice: User, project: Project) -> None:
    name = "n" * max_length(Target)

    target = target_create(
        project=project, user=alice, name=f"  {name} ", kind="python", config=ECHO
    )

    assert Target.objects.get(pk=target.pk).name == name


def test_evalrun_refuses_a_long_project_name(alice: User, tmp_path: Path) -> None:
    items = tmp_path / "items.jsonl"
    items.write_text(json.dumps({"input": "a", "expected": "a"}) + "\n")

    with pytest.raises(CommandError, match="name"):
        call_command(
            "evalrun",
            str(items),
            "--user",
            "alice",
            "--project",
            _too_long(Project),
            "--target",
            "python",
            "--callable",
            "runs.targets.examples.echo",
            "--scorer",
            "exact_match",
            stdout=io.StringIO(),
        )

    assert not Project.objects.filter(name=_too_long(Project)).exists()
    assert not Run.objects.exists()
