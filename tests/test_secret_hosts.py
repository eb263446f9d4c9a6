"""A project secret goes only to the hosts a project admin bound it to: every
target, judge and chain that would send it elsewhere is refused when saved,
when a run is created or re-scored, when run and when tried."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from runs.executor.engine import execute_run
from runs.executor.rescore import execute_scoring_pass
from runs.models import Project, Run, RunStatus, ScoringPass, Target
from runs.rescore.services import run_rescore
from runs.results.services import run_create
from runs.testing.fake_openai import FakeOpenAIServer
from tests.factories import arithmetic_items, make_dataset, set_bound_secret
from tests.mixed_results import ended_run_with_two_failures

API = "/api/v1"
KEY = "sk-bound-0123456789abcdef"
NAME = "OPENAI_API_KEY"


@pytest.fixture
def evil() -> Iterator[FakeOpenAIServer]:
    """A server the secret is not bound to (another port of the same host)."""
    fake = FakeOpenAIServer()
    fake.start()
    try:
        yield fake
    finally:
        fake.stop()


@pytest.fixture
def bound_key(alice: User, project: Project, fake_openai: FakeOpenAIServer) -> None:
    set_bound_secret(project, alice, NAME, KEY, url=fake_openai.base_url)


def refusal(server: FakeOpenAIServer, name: str = NAME) -> str:
    return (
        f"project secret {name} may not be sent to http://127.0.0.1:{server.port}: "
        "it is not bound to that host"
    )


def chat(server: FakeOpenAIServer, **extra: Any) -> dict[str, Any]:
    return {"base_url": server.base_url, "model": "m", "api_key_secret": NAME, **extra}


def judge(server: FakeOpenAIServer) -> dict[str, Any]:
    params = {**chat(server), "max_attempts": 1}
    return {"kind": "llm_judge", "name": "judge", "params": params}


def post(client: Client, path: str, body: dict[str, Any]):
    return client.post(f"{API}{path}", body, content_type="application/json")


def create_target(client: Client, project: Project, kind: str, config: dict):
    body = {"project": project.pk, "name": "t", "kind": kind, "config": config}
    return post(client, "/targets", body)


def assert_refused(response, field: str, server: FakeOpenAIServer) -> None:
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["field"] == field
    assert refusal(server) in body["detail"]


def nothing_sent(server: FakeOpenAIServer) -> bool:
    return server.stats.requests == 0 and server.stats.authorization == set()


# -- when saved ------------------------------------------------------------------


@pytest.mark.django_db
def test_an_http_target_sending_a_secret_elsewhere_is_refused_when_saved(
    bob_client: Client, project: Project, bound_key: None, evil: FakeOpenAIServer
) -> None:
    config = {"url": f"{evil.base_url}/chat/completions", "auth_secret": NAME}
    response = create_target(bob_client, project, "http", config)
    assert_refused(response, "config.auth_secret", evil)
    assert not Target.objects.exists()


@pytest.mark.django_db
def test_an_openai_chat_target_sending_a_secret_elsewhere_is_refused_when_saved(
    bob_client: Client,
    project: Project,
    bound_key: None,
    fake_openai: FakeOpenAIServer,
    evil: FakeOpenAIServer,
) -> None:
    refused = create_target(bob_client, project, "openai_chat", chat(evil))
    assert_refused(refused, "config.api_key_secret", evil)
    created = create_target(bob_client, project, "openai_chat", chat(fake_openai))
    assert created.status_code == 201
    target_id = created.json()["id"]
    moved = bob_client.patch(
        f"{API}/targets/{target_id}",
        {"config": chat(evil)},
        content_type="application/json",
    )
    assert_refused(moved, "config.api_key_secret", evil)
    assert Target.objects.get().config["base_url"] == fake_openai.base_url


@pytest.mark.django_db
def test_a_scorer_target_sending_a_secret_elsewhere_is_refused_when_saved(
    bob_client: Client, project: Project, bound_key: None, evil: FakeOpenAIServer
) -> None:
    config = {"scorer_kind": "llm_judge", "params": chat(evil)}
    response = create_target(bob_client, project, "scorer", config)
    assert_refused(response, "config.params.api_key_secret", evil)
    assert not Target.objects.exists()


@pytest.mark.django_db
def test_a_chain_target_sending_a_secret_elsewhere_is_refused_when_saved(
    bob_client: Client, project: Project, bound_key: None, evil: FakeOpenAIServer
) -> None:
    config = {"run": 1, "target": {"kind": "openai_chat", "config": chat(evil)}}
    response = create_target(bob_client, project, "chain", config)
    assert_refused(response, "config.target.config.api_key_secret", evil)
    assert not Target.objects.exists()


@pytest.mark.django_db
def test_the_refusal_is_the_same_whether_the_secret_exists_or_not(
    bob_client: Client, project: Project, bound_key: None, evil: FakeOpenAIServer
) -> None:
    answers = {}
    for name in (NAME, "NO_SUCH_SECRET"):
        config = chat(evil, api_key_secret=name)
        response = create_target(bob_client, project, "openai_chat", config)
        assert response.status_code == 400
        answers[name] = response.json()["detail"].replace(name, "NAME")
    assert answers[NAME] == answers["NO_SUCH_SECRET"]
    assert refusal(evil, "NAME") in answers[NAME]


# -- when a run is created or re-scored ----------------------------------------


@pytest.mark.django_db
def test_a_judge_sending_a_secret_elsewhere_is_refused_when_a_run_is_created(
    bob_client: Client,
    project: Project,
    bound_key: None,
    fake_openai: FakeOpenAIServer,
    evil: FakeOpenAIServer,
) -> None:
    dataset = make_dataset(project, arithmetic_items(2))
    body = {
        "dataset": dataset.pk,
        "target_kind": "openai_chat",
        "target_config": {"base_url": fake_openai.base_url, "model": "m"},
        "scorers": ["exact_match", judge(evil)],
    }
    response = post(bob_client, "/runs", body)
    assert_refused(response, "scorers[1].params.api_key_secret", evil)
    assert not Run.objects.exists()


@pytest.mark.django_db
def test_a_run_of_a_target_or_chain_sending_a_secret_elsewhere_is_refused(
    bob_client: Client,
    project: Project,
    bound_key: None,
    fake_openai: FakeOpenAIServer,
    evil: FakeOpenAIServer,
) -> None:
    dataset = make_dataset(project, arithmetic_items(2))
    # A target saved before secrets were bound to hosts.
    saved = Target.objects.create(
        project=project, name="old", kind="openai_chat", config=chat(evil)
    )
    by_id = post(
        bob_client,
        "/runs",
        {"dataset": dataset.pk, "target": saved.pk, "scorers": ["exact_match"]},
    )
    assert_refused(by_id, "target_config.api_key_secret", evil)
    source = run_create(
        user=None,
        dataset=dataset,
        target_kind="openai_chat",
        target_config={"base_url": fake_openai.base_url, "model": "m"},
        scorers=["exact_match"],
        launch=False,
    )
    Run.objects.filter(pk=source.pk).update(status=RunStatus.COMPLETED)
    for target, field in (
        ({"kind": "openai_chat", "config": chat(evil)}, "target.config"),
        ({"id": saved.pk}, "target.config"),
    ):
        body = {
            "dataset": dataset.pk,
            "target_kind": "chain",
            "target_config": {"run": source.pk, "target": target},
            "scorers": ["exact_match"],
        }
        chained = post(bob_client, "/runs", body)
        assert_refused(chained, f"target_config.{field}.api_key_secret", evil)
    scorer_target = {
        "dataset": dataset.pk,
        "target_kind": "scorer",
        "target_config": {"scorer_kind": "llm_judge", "params": chat(evil)},
        "scorers": ["exact_match"],
    }
    response = post(bob_client, "/runs", scorer_target)
    assert_refused(response, "target_config.params.api_key_secret", evil)
    assert list(Run.objects.all()) == [source]


@pytest.mark.django_db(transaction=True)
def test_a_rescore_adding_a_judge_that_sends_a_secret_elsewhere_is_refused(
    bob_client: Client,
    project: Project,
    bound_key: None,
    fake_openai: FakeOpenAIServer,
    evil: FakeOpenAIServer,
) -> None:
    run = ended_run_with_two_failures(project, fake_openai)
    response = post(bob_client, f"/runs/{run.pk}/rescore", {"scorers": [judge(evil)]})
    assert_refused(response, "scorers[0].params.api_key_secret", evil)
    assert not ScoringPass.objects.exists()
    run.refresh_from_db()
    assert [spec["name"] for spec in run.scorers] == ["exact_match"]
    assert nothing_sent(evil)


# -- when run and tried (configurations stored before the check) ---------------


@pytest.mark.django_db
@pytest.mark.parametrize("kind", ["openai_chat", "http"])
def test_trying_a_stored_target_that_sends_a_secret_elsewhere_sends_nothing(
    bob_client: Client,
    project: Project,
    bound_key: None,
    evil: FakeOpenAIServer,
    kind: str,
) -> None:
    config = (
        chat(evil)
        if kind == "openai_chat"
        else {"url": f"{evil.base_url}/chat/completions", "auth_secret": NAME}
    )
    target = Target.objects.create(project=project, name="t", kind=kind, config=config)
    response = post(bob_client, f"/targets/{target.pk}/try", {"input": "hi"})
    assert response.status_code == 200
    assert response.json()["ok"] is False
    assert refusal(evil) in response.json()["error"]
    assert nothing_sent(evil)


def forced_run(
    project: Project, server: FakeOpenAIServer, scorers: list | None = None, **changes
) -> Run:
    """A run created bound, then changed in the database as if stored before."""
    run = run_create(
        user=None,
        dataset=make_dataset(
            project, arithmetic_items(2), version=Run.objects.count() + 1
        ),
        target_kind="openai_chat",
        target_config={"base_url": server.base_url, "model": "m"},
        scorers=scorers or ["exact_match"],
        options={"max_attempts": 1},
        launch=False,
    )
    Run.objects.filter(pk=run.pk).update(**changes)
    return run


def moved_judge(run: Run, server: FakeOpenAIServer) -> Run:
    """The run's judge sent to ``server``, in the database."""
    specs = run.scorers
    specs[-1]["params"]["base_url"] = server.base_url
    Run.objects.filter(pk=run.pk).update(scorers=specs)
    return run


def run_to_the_end(run: Run) -> Run:
    async_to_sync(execute_run)(run.pk)
    run.refresh_from_db()
    return run


@pytest.mark.django_db(transaction=True)
def test_a_stored_run_sending_a_secret_elsewhere_fails_and_sends_nothing(
    project: Project,
    bound_key: None,
    fake_openai: FakeOpenAIServer,
    evil: FakeOpenAIServer,
) -> None:
    source = run_to_the_end(forced_run(project, fake_openai))
    chain = {"run": source.pk, "target": {"kind": "openai_chat", "config": chat(evil)}}
    scorer_target = {
        "scorer_kind": "llm_judge",
        "params": chat(evil),
        "output": "verdict",
        "input_key": "input",
        "expected_key": "expected",
    }
    forced = [
        forced_run(project, fake_openai, target_config=chat(evil)),
        moved_judge(
            forced_run(project, fake_openai, ["exact_match", judge(fake_openai)]), evil
        ),
        forced_run(project, fake_openai, target_kind="chain", target_config=chain),
        forced_run(
            project, fake_openai, target_kind="scorer", target_config=scorer_target
        ),
    ]
    for run in forced:
        run = run_to_the_end(run)
        assert run.status == RunStatus.FAILED, run.target_kind
        assert refusal(evil) in run.error, run.target_kind
    assert nothing_sent(evil)


@pytest.mark.django_db(transaction=True)
def test_a_stored_scoring_pass_sending_a_secret_elsewhere_fails_and_sends_nothing(
    project: Project,
    bound_key: None,
    fake_openai: FakeOpenAIServer,
    evil: FakeOpenAIServer,
) -> None:
    run = ended_run_with_two_failures(project, fake_openai)
    plan = run_rescore(run=run, user=None, scorers=[judge(fake_openai)], launch=False)
    scoring = plan.scoring_pass
    assert scoring is not None
    ScoringPass.objects.filter(pk=scoring.pk).update(scorers=[judge(evil)])
    async_to_sync(execute_scoring_pass)(scoring.pk)
    scoring.refresh_from_db()
    assert scoring.status == ScoringPass.Status.FAILED
    assert refusal(evil) in scoring.error
    assert nothing_sent(evil)


# -- a bound host ------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_secret_bound_by_the_api_reaches_its_host(
    alice_client: Client,
    bob_client: Client,
    project: Project,
    fake_openai: FakeOpenAIServer,
) -> None:
    bound = alice_client.put(
        f"{API}/projects/{project.pk}/secrets/{NAME}",
        {"value": KEY, "hosts": [f"http://127.0.0.1:{fake_openai.port}"]},
        content_type="application/json",
    )
    assert bound.status_code == 201
    created = create_target(bob_client, project, "openai_chat", chat(fake_openai))
    assert created.status_code == 201
    tried = post(bob_client, f"/targets/{created.json()['id']}/try", {"input": "1+1"})
    assert tried.json()["ok"] is True, tried.json()
    run = forced_run(project, fake_openai, target_config=chat(fake_openai))
    assert run_to_the_end(run).status == RunStatus.COMPLETED
    assert fake_openai.stats.authorization == {f"Bearer {KEY}"}


@pytest.mark.django_db
def test_the_targets_page_shows_the_refusal_on_the_secrets_field(
    bob_client: Client, project: Project, bound_key: None, evil: FakeOpenAIServer
) -> None:
    response = bob_client.post(
        reverse("runs:target_list"),
        {
            "project": project.pk,
            "name": "t",
            "kind": "openai_chat",
            "openai_chat__base_url": evil.base_url,
            "openai_chat__model": "m",
            "openai_chat__api_key_secret": NAME,
        },
    )
    assert response.status_code == 200
    errors = response.context["form"].errors["openai_chat__api_key_secret"]
    assert refusal(evil) in errors[0]
    assert not Target.objects.exists()
