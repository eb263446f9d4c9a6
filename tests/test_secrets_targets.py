"""Targets use project secrets by name; environment variables only as the operator
allows, and only towards the hosts each is bound to."""

from __future__ import annotations

import logging

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User
from django.core.exceptions import ImproperlyConfigured
from django.test import Client

from evalsite.env import env_secret_bindings
from runs.errors import InvalidInput
from runs.executor.engine import execute_run
from runs.models import Project, Result, Run, RunStatus, Target
from runs.results.services import run_create
from runs.testing.fake_openai import FakeOpenAIServer
from tests.factories import arithmetic_items, make_dataset, set_bound_secret

API = "/api/v1"
SERVER_SECRET = "server-only-s3cr3t-value"
PROVIDER_KEY = "sk-project-key-0123456789"


def new_run(project: Project, config: dict, *, user: User | None = None) -> Run:
    return run_create(
        user=user,
        dataset=make_dataset(project, arithmetic_items(2)),
        target_kind="openai_chat",
        target_config={"model": "fake", **config},
        scorers=["exact_match"],
        launch=False,
    )


def create_target(client: Client, project: Project, config: dict):
    return client.post(
        f"{API}/targets",
        data={
            "project": project.pk,
            "name": "t",
            "kind": "openai_chat",
            "config": {"model": "m", **config},
        },
        content_type="application/json",
    )


# -- environment variables -------------------------------------------------------------


@pytest.mark.django_db
def test_unlisted_variables_are_refused_alike_whether_they_exist_or_not(
    bob_client: Client, project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No existence oracle: a set and an unset variable give the same answer."""
    monkeypatch.setenv("EVALSITE_TEST_PRESENT", SERVER_SECRET)
    monkeypatch.delenv("EVALSITE_TEST_ABSENT", raising=False)
    answers = {}
    for name in ("EVALSITE_TEST_PRESENT", "EVALSITE_TEST_ABSENT"):
        response = create_target(
            bob_client,
            project,
            {"base_url": "https://api.example.org/v1", "api_key_env": name},
        )
        assert response.status_code == 400
        body = response.json()
        assert body["field"] == "config.api_key_env"
        answers[name] = body["detail"].replace(name, "NAME")
    assert answers["EVALSITE_TEST_PRESENT"] == answers["EVALSITE_TEST_ABSENT"]
    assert "not a variable the operator allows" in answers["EVALSITE_TEST_ABSENT"]
    assert not Target.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize("name", ["EVALSITE_SECRET_KEY", "DATABASE_URL", "PATH"])
def test_server_variables_cannot_be_named_when_a_run_is_created(
    project: Project, fake_openai: FakeOpenAIServer, name: str
) -> None:
    with pytest.raises(InvalidInput) as caught:
        new_run(project, {"base_url": fake_openai.base_url, "api_key_env": name})
    assert caught.value.field == "target_config.api_key_env"
    assert not Run.objects.exists()


@pytest.mark.django_db(transaction=True)
async def test_a_stored_run_naming_a_server_variable_sends_nothing(
    project: Project, fake_openai: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run saved before the allowlist existed must not leak the variable."""
    monkeypatch.setenv("EVALSITE_TEST_SERVER_SECRET", SERVER_SECRET)
    run = await sync_to_async(new_run)(project, {"base_url": fake_openai.base_url})
    run.target_config = {
        **run.target_config,
        "api_key_env": "EVALSITE_TEST_SERVER_SECRET",
    }
    await run.asave()
    status = await execute_run(run.pk)
    await run.arefresh_from_db()
    assert status == RunStatus.FAILED
    assert "not a variable the operator allows" in run.error
    assert SERVER_SECRET not in run.error
    assert fake_openai.stats.requests == 0
    assert fake_openai.stats.authorization == set()


@pytest.mark.django_db(transaction=True)
async def test_a_listed_variable_is_sent_to_its_bound_host(
    project: Project, fake_openai: FakeOpenAIServer, monkeypatch, settings
) -> None:
    settings.EVALSITE_ENV_SECRETS = {
        "MODEL_KEY": (f"http://127.0.0.1:{fake_openai.port}",)
    }
    monkeypatch.setenv("MODEL_KEY", PROVIDER_KEY)
    config = {"base_url": fake_openai.base_url, "api_key_env": "MODEL_KEY"}
    run = await sync_to_async(new_run)(project, config)
    assert await execute_run(run.pk) == RunStatus.COMPLETED
    assert fake_openai.stats.authorization == {f"Bearer {PROVIDER_KEY}"}


@pytest.mark.django_db
def test_a_listed_variable_is_refused_for_another_host(
    bob_client: Client, project: Project, settings
) -> None:
    settings.EVALSITE_ENV_SECRETS = {"OPENAI_API_KEY": ("api.openai.com",)}
    response = create_target(
        bob_client,
        project,
        {"base_url": "https://attacker.example/v1", "api_key_env": "OPENAI_API_KEY"},
    )
    assert response.status_code == 400
    assert response.json()["detail"] == (
        "field 'config.api_key_env': OPENAI_API_KEY may only be sent to "
        "api.openai.com, not to https://attacker.example"
    )


@pytest.mark.django_db
def test_a_variable_bound_to_a_host_is_not_sent_over_plain_http(
    bob_client: Client, project: Project, fake_openai: FakeOpenAIServer, settings
) -> None:
    settings.EVALSITE_ENV_SECRETS = {"MODEL_KEY": ("127.0.0.1",)}
    config = {"base_url": fake_openai.base_url, "api_key_env": "MODEL_KEY"}
    refused = create_target(bob_client, project, config)
    assert refused.status_code == 400
    assert refused.json()["detail"] == (
        "field 'config.api_key_env': MODEL_KEY may only be sent to 127.0.0.1, "
        f"not to http://127.0.0.1:{fake_openai.port}"
    )
    settings.EVALSITE_ENV_SECRETS = {
        "MODEL_KEY": (f"http://127.0.0.1:{fake_openai.port}",)
    }
    assert create_target(bob_client, project, config).status_code == 201


@pytest.mark.django_db
def test_a_variable_bound_to_a_host_is_not_sent_to_another_port(
    bob_client: Client, project: Project, settings
) -> None:
    settings.EVALSITE_ENV_SECRETS = {"MODEL_KEY": ("api.example.org",)}
    config = {"base_url": "https://api.example.org:8443/v1", "api_key_env": "MODEL_KEY"}
    refused = create_target(bob_client, project, config)
    assert refused.status_code == 400
    assert "not to https://api.example.org:8443" in refused.json()["detail"]
    settings.EVALSITE_ENV_SECRETS = {"MODEL_KEY": ("https://api.example.org:8443",)}
    assert create_target(bob_client, project, config).status_code == 201


@pytest.mark.django_db(transaction=True)
async def test_a_stored_run_sending_a_variable_over_plain_http_sends_nothing(
    project: Project, fake_openai: FakeOpenAIServer, monkeypatch, settings
) -> None:
    settings.EVALSITE_ENV_SECRETS = {"MODEL_KEY": ("127.0.0.1",)}
    monkeypatch.setenv("MODEL_KEY", PROVIDER_KEY)
    run = await sync_to_async(new_run)(project, {"base_url": fake_openai.base_url})
    run.target_config = {**run.target_config, "api_key_env": "MODEL_KEY"}
    await run.asave()
    assert await execute_run(run.pk) == RunStatus.FAILED
    await run.arefresh_from_db()
    assert f"not to http://127.0.0.1:{fake_openai.port}" in run.error
    assert fake_openai.stats.requests == 0


@pytest.mark.django_db
def test_a_wildcard_binding_covers_subdomains_only(
    bob_client: Client, project: Project, settings
) -> None:
    settings.EVALSITE_ENV_SECRETS = {"ANTHROPIC_KEY": ("*.anthropic.com",)}
    good = create_target(
        bob_client,
        project,
        {"base_url": "https://api.anthropic.com/v1", "api_key_env": "ANTHROPIC_KEY"},
    )
    bad = create_target(
        bob_client,
        project,
        {"base_url": "https://anthropic.com.evil/v1", "api_key_env": "ANTHROPIC_KEY"},
    )
    assert (good.status_code, bad.status_code) == (201, 400)


@pytest.mark.django_db(transaction=True)
async def test_a_listed_but_unset_variable_fails_the_run_without_its_value(
    project: Project, fake_openai: FakeOpenAIServer, monkeypatch, settings
) -> None:
    settings.EVALSITE_ENV_SECRETS = {
        "MODEL_KEY": (f"http://127.0.0.1:{fake_openai.port}",)
    }
    monkeypatch.delenv("MODEL_KEY", raising=False)
    config = {"base_url": fake_openai.base_url, "api_key_env": "MODEL_KEY"}
    run = await sync_to_async(new_run)(project, config)
    assert await execute_run(run.pk) == RunStatus.FAILED
    await run.arefresh_from_db()
    assert "MODEL_KEY is listed in EVALSITE_ENV_SECRETS but not set" in run.error


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("", {}),
        ("OPENAI_API_KEY=api.openai.com", {"OPENAI_API_KEY": ("api.openai.com",)}),
        (
            "A=api.anthropic.com|*.anthropic.com, B=127.0.0.1",
            {"A": ("api.anthropic.com", "*.anthropic.com"), "B": ("127.0.0.1",)},
        ),
    ],
)
def test_env_secrets_setting_is_parsed(
    monkeypatch: pytest.MonkeyPatch, raw: str, expected: dict
) -> None:
    monkeypatch.setenv("EVALSITE_ENV_SECRETS", raw)
    assert env_secret_bindings("EVALSITE_ENV_SECRETS") == expected


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("OPENAI_API_KEY", "must be VARIABLE=host"),
        ("OPENAI_API_KEY=", "must be VARIABLE=host"),
        ("1KEY=api.openai.com", "is not a variable name"),
        ("KEY=https://api.openai.com/v1", "without a path"),
        ("KEY=ftp://api.openai.com", "scheme must be https or http"),
        ("KEY=*", "every host"),
        ("KEY=api.openai.com:99999", "port must be 1 to 65535"),
        ("EVALSITE_SECRET_KEY=api.openai.com", "the server's own secret"),
        ("DATABASE_URL=db.example", "the server's own secret"),
    ],
)
def test_env_secrets_setting_refuses_bad_values(
    monkeypatch: pytest.MonkeyPatch, raw: str, message: str
) -> None:
    monkeypatch.setenv("EVALSITE_ENV_SECRETS", raw)
    with pytest.raises(ImproperlyConfigured, match=message):
        env_secret_bindings("EVALSITE_ENV_SECRETS")


# -- project secrets -------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
async def test_a_project_secret_is_sent_and_never_recorded(
    alice: User,
    project: Project,
    fake_openai: FakeOpenAIServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    await sync_to_async(set_bound_secret)(
        project, alice, "OPENAI_API_KEY", PROVIDER_KEY, url=fake_openai.base_url
    )
    config = {"base_url": fake_openai.base_url, "api_key_secret": "OPENAI_API_KEY"}
    run = await sync_to_async(new_run)(project, config, user=alice)
    caplog.set_level(logging.DEBUG)
    assert await execute_run(run.pk) == RunStatus.COMPLETED
    assert fake_openai.stats.authorization == {f"Bearer {PROVIDER_KEY}"}
    await run.arefresh_from_db()
    stored = [run.target_config, run.error, run.options]
    async for result in Result.objects.filter(run=run):
        stored += [result.attempts, result.error_message, result.output]
    assert PROVIDER_KEY not in str(stored)
    assert PROVIDER_KEY not in caplog.text


@pytest.mark.django_db(transaction=True)
async def test_a_secret_failing_at_the_endpoint_is_not_echoed(
    alice: User, project: Project, fake_openai: FakeOpenAIServer
) -> None:
    await sync_to_async(set_bound_secret)(
        project, alice, "K", PROVIDER_KEY, url=fake_openai.base_url
    )
    dataset = await sync_to_async(make_dataset)(
        project, [{"id": "1", "input": "[[status:401]]", "expected": "x"}]
    )
    run = await sync_to_async(run_create)(
        user=alice,
        dataset=dataset,
        target_kind="openai_chat",
        target_config={
            "base_url": fake_openai.base_url,
            "model": "m",
            "api_key_secret": "K",
        },
        scorers=["exact_match"],
        launch=False,
    )
    await execute_run(run.pk)
    result = await Result.objects.aget(run=run)
    assert result.error_message == "HTTP 401 Unauthorized: simulated 401"
    assert PROVIDER_KEY not in str(result.attempts)


@pytest.mark.django_db
def test_a_missing_secret_is_refused_naming_it(
    project: Project, fake_openai: FakeOpenAIServer
) -> None:
    config = {"base_url": fake_openai.base_url, "api_key_secret": "NOT_SET_YET"}
    with pytest.raises(InvalidInput, match="NOT_SET_YET") as caught:
        new_run(project, config)
    assert caught.value.field == "target_config.api_key_secret"


@pytest.mark.django_db
def test_another_projects_secret_cannot_be_used(
    project: Project,
    other_project: Project,
    mallory: User,
    fake_openai: FakeOpenAIServer,
) -> None:
    set_bound_secret(other_project, mallory, "K", "theirs", url=fake_openai.base_url)
    config = {"base_url": fake_openai.base_url, "api_key_secret": "K"}
    with pytest.raises(InvalidInput, match="project secret K may not be sent to"):
        new_run(project, config)


@pytest.mark.django_db
def test_api_run_creation_names_the_missing_secret(
    bob_client: Client, project: Project, fake_openai: FakeOpenAIServer
) -> None:
    dataset = make_dataset(project, arithmetic_items(1))
    response = bob_client.post(
        f"{API}/runs",
        data={
            "dataset": dataset.pk,
            "target_kind": "openai_chat",
            "target_config": {
                "base_url": fake_openai.base_url,
                "model": "m",
                "api_key_secret": "OPENAI_API_KEY",
            },
            "scorers": ["exact_match"],
        },
        content_type="application/json",
    )
    assert response.status_code == 400
    assert response.json()["field"] == "target_config.api_key_secret"
    assert (
        "project secret OPENAI_API_KEY may not be sent to "
        f"http://127.0.0.1:{fake_openai.port}: it is not bound to that host"
    ) in response.json()["detail"]


@pytest.mark.django_db
def test_both_a_secret_and_a_variable_is_refused(
    bob_client: Client, project: Project, settings
) -> None:
    settings.EVALSITE_ENV_SECRETS = {"K": ("127.0.0.1",)}
    response = create_target(
        bob_client,
        project,
        {
            "base_url": "http://127.0.0.1:9/v1",
            "api_key_secret": "K",
            "api_key_env": "K",
        },
    )
    assert response.status_code == 400
    assert response.json()["field"] == "config.api_key_env"


@pytest.mark.django_db
def test_target_config_keeps_only_the_name(
    alice: User, bob_client: Client, project: Project
) -> None:
    set_bound_secret(project, alice, "OPENAI_API_KEY", "v", url="http://127.0.0.1:9")
    response = create_target(
        bob_client,
        project,
        {"base_url": "http://127.0.0.1:9/v1", "api_key_secret": "OPENAI_API_KEY"},
    )
    assert response.status_code == 201
    assert response.json()["config"]["api_key_secret"] == "OPENAI_API_KEY"
