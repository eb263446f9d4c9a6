"""What an editor can save is bounded: scorers per run (EVALSITE_MAX_SCORERS)
and a target's configuration (EVALSITE_MAX_TARGET_CONFIG_BYTES), on every
path that saves them, with an error naming the field and nothing written."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from runs.models import Dataset, Project, Run, ScoringPass, Target
from runs.targets import clean_target_config
from runs.targets.services import target_create
from tests.mixed_results import mixed_run

pytestmark = pytest.mark.django_db

API = "/api/v1"
CONFIG = {"base_url": "http://127.0.0.1:9/v1", "model": "m"}


def _oversized(limit: int) -> dict[str, Any]:
    """A valid configuration one byte over ``limit`` as compact JSON, as stored."""
    config = {**CONFIG, "extra_body": {"note": ""}}
    cleaned = clean_target_config("openai_chat", config)
    size = len(json.dumps(cleaned, separators=(",", ":")).encode())
    config["extra_body"]["note"] = "x" * (limit - size + 1)
    return config


def _scorers(count: int) -> list[dict[str, Any]]:
    return [{"kind": "includes", "name": f"includes {n}"} for n in range(count)]


def _post(client: Client, path: str, body: dict[str, Any]) -> Any:
    return client.post(f"{API}{path}", body, content_type="application/json")


def test_a_target_over_the_size_limit_is_refused_naming_config(
    alice_client: Client, project: Project, settings: Any
) -> None:
    response = _post(
        alice_client,
        "/targets",
        {
            "project": project.pk,
            "name": "big",
            "kind": "openai_chat",
            "config": _oversized(settings.EVALSITE_MAX_TARGET_CONFIG_BYTES),
        },
    )

    assert response.status_code == 400
    assert response.json()["field"] == "config"
    assert "EVALSITE_MAX_TARGET_CONFIG_BYTES" in response.json()["detail"]
    assert not Target.objects.exists()


def test_a_target_at_the_size_limit_is_saved(
    alice_client: Client, project: Project, settings: Any
) -> None:
    config = _oversized(settings.EVALSITE_MAX_TARGET_CONFIG_BYTES)
    config["extra_body"]["note"] = config["extra_body"]["note"][:-1]

    response = _post(
        alice_client,
        "/targets",
        {"project": project.pk, "name": "big", "kind": "openai_chat", "config": config},
    )

    assert response.status_code == 201, response.content


def test_an_edit_over_the_size_limit_is_refused_and_keeps_the_target(
    alice_client: Client, alice: User, project: Project, settings: Any
) -> None:
    target = target_create(
        project=project, user=alice, name="t", kind="openai_chat", config=CONFIG
    )

    response = alice_client.patch(
        f"{API}/targets/{target.pk}",
        {"config": _oversized(settings.EVALSITE_MAX_TARGET_CONFIG_BYTES)},
        content_type="application/json",
    )

    assert response.status_code == 400
    assert response.json()["field"] == "config"
    assert Target.objects.get(pk=target.pk).config == target.config


def test_a_run_with_an_oversized_target_config_is_refused(
    alice_client: Client, dataset: Dataset, settings: Any
) -> None:
    response = _post(
        alice_client,
        "/runs",
        {
            "dataset": dataset.pk,
            "target_kind": "openai_chat",
            "target_config": _oversized(settings.EVALSITE_MAX_TARGET_CONFIG_BYTES),
            "scorers": ["includes"],
        },
    )

    assert response.status_code == 400
    assert response.json()["field"] == "target_config"
    assert not Run.objects.exists()


def test_a_run_with_too_many_scorers_is_refused_naming_scorers(
    alice_client: Client, dataset: Dataset, settings: Any
) -> None:
    limit = settings.EVALSITE_MAX_SCORERS
    body = {
        "dataset": dataset.pk,
        "target_kind": "python",
        "target_config": {"callable": "runs.targets.examples.echo"},
    }

    refused = _post(alice_client, "/runs", {**body, "scorers": _scorers(limit + 1)})
    accepted = _post(alice_client, "/runs", {**body, "scorers": _scorers(limit)})

    assert refused.status_code == 400
    assert refused.json()["field"] == "scorers"
    assert f"at most {limit}" in refused.json()["detail"]
    assert accepted.status_code == 201, accepted.content
    assert Run.objects.count() == 1


def test_a_rescore_that_would_pass_the_scorer_limit_is_refused(
    alice_client: Client, dataset: Dataset, settings: Any
) -> None:
    run = mixed_run(dataset, ended=True)
    room = settings.EVALSITE_MAX_SCORERS - len(run.scorers)
    passes = ScoringPass.objects.count()

    response = _post(
        alice_client, f"/runs/{run.pk}/rescore", {"scorers": _scorers(room + 1)}
    )

    assert response.status_code == 400
    assert response.json()["field"] == "scorers"
    run.refresh_from_db()
    assert len(run.scorers) == settings.EVALSITE_MAX_SCORERS - room
    assert ScoringPass.objects.count() == passes
