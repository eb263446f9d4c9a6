"""One test request through a target: outcomes and redaction."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from runs.models import Project
from runs.secrets.redaction import Redactor
from runs.targets import trial
from runs.targets.services import target_create
from runs.testing.fake_openai import FakeOpenAIServer
from runs.testing.key_forms import FORMS, leaks
from tests.stored_texts import store_secret

KEY = "sk-try-Wd4pL0qZ7xN2cV9b"


async def test_a_configuration_that_cannot_build_is_an_error_outcome() -> None:
    outcome = await trial.send_one(
        "python", {"callable": "os.system"}, "hi", seconds=1.0
    )

    assert not outcome.ok
    assert outcome.error_type == "ConfigError"
    assert "EVALSITE_PYTHON_TARGETS" in outcome.error


async def test_a_python_target_answers() -> None:
    outcome = await trial.send_one(
        "python", {"callable": "runs.targets.examples.echo"}, "ping", seconds=1.0
    )

    assert (outcome.ok, outcome.output, outcome.error) == (True, "ping", "")


async def test_redacted_replaces_secrets_and_cuts_long_texts() -> None:
    outcome = trial.TargetTry(
        ok=False, output="x" * (trial.MAX_CHARS + 5), error="bad key s3cret"
    )

    clean = await trial.redacted(outcome, Redactor([("key", "s3cret")]))

    assert clean.error == "bad key [redacted secret key]"
    assert len(clean.output) == trial.MAX_CHARS


@pytest.mark.django_db
@pytest.mark.parametrize("form", sorted(FORMS))
def test_the_try_endpoint_shows_no_form_of_the_key_it_was_echoed(
    bob_client: Client,
    alice: User,
    project: Project,
    fake_openai: FakeOpenAIServer,
    form: str,
) -> None:
    store_secret(project, alice, "TRY_KEY", KEY, url=fake_openai.base_url)
    target = target_create(
        project=project,
        user=alice,
        name="echoing",
        kind="openai_chat",
        config={
            "base_url": fake_openai.base_url,
            "model": "m",
            "api_key_secret": "TRY_KEY",
        },
    )
    url = f"/api/v1/targets/{target.pk}/try"

    answers = [
        bob_client.post(url, {"input": text}, content_type="application/json")
        for text in (f"hi [[echo_key:{form}]]", f"[[status:401]][[echo_key:{form}]]")
    ]

    assert fake_openai.stats.authorization == {f"Bearer {KEY}"}
    for response in answers:
        assert leaks(response.content.decode(), KEY) == []
    answer, failure = (response.json() for response in answers)
    assert answer["ok"] and answer["output"].startswith("hi (your key: ")
    assert not failure["ok"] and failure["error"].startswith("HTTP 401")
    for response in answers:
        assert "[redacted secret api_key]" in response.content.decode()


async def test_a_secret_across_the_cut_leaves_no_part_of_itself() -> None:
    outcome = trial.TargetTry(ok=True, output="x" * (trial.MAX_CHARS - 6) + KEY)

    clean = await trial.redacted(outcome, Redactor([("api_key", KEY)]))

    assert clean.output == "x" * (trial.MAX_CHARS - 6) + "[redac"
