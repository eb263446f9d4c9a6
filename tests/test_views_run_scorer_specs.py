"""Named scorer instances and conditions through the new-run form and the API."""

from __future__ import annotations

import json
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.test import Client
from django.urls import reverse

from runs.executor.engine import execute_run
from runs.models import Dataset, Project, Result, Run, Score, Target
from runs.results.services import run_create
from runs.testing.fake_openai import FakeOpenAIServer
from tests.executor.conftest import wait_for
from tests.factories import make_dataset

API = "/api/v1"


@pytest.fixture
def demo_target(project: Project) -> Target:
    return Target.objects.create(
        project=project,
        name="Demo model",
        kind="demo",
        config={"min_latency_ms": 0, "max_latency_ms": 0, "transient_error_rate": 0},
    )


def judges(base_url: str) -> list[dict[str, Any]]:
    params = {"base_url": base_url, "model": "fake-judge"}
    return [
        {
            "kind": "llm_judge",
            "name": "judge-strict",
            "params": {**params, "verdict_format": "scale_1_5", "pass_threshold": 5},
            "when": {"scorer": "exact_match", "passed": False},
        },
        {
            "kind": "llm_judge",
            "name": "judge-lenient",
            "params": {**params, "verdict_format": "pass_fail"},
        },
    ]


def form_data(dataset: Dataset, target: Target, **changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "dataset": dataset.pk,
        "target": target.pk,
        "scorers": ["exact_match"],
        "concurrency": 2,
        "max_attempts": 1,
        "epochs": 1,
    }
    data.update(changes)
    return data


def test_the_form_takes_named_instances_and_conditions(
    bob_client: Client,
    dataset: Dataset,
    demo_target: Target,
    fake_openai: FakeOpenAIServer,
) -> None:
    specs = judges(fake_openai.base_url)
    data = form_data(dataset, demo_target, scorer_specs=json.dumps(specs))

    response = bob_client.post(reverse("runs:run_new"), data)

    assert response.status_code == 302
    run = Run.objects.get()
    assert run.scorer_names == ["exact_match", "judge-strict", "judge-lenient"]
    assert run.scorers[1]["when"] == {"scorer": "exact_match", "passed": False}
    assert run.scorers[1]["params"]["verdict_format"] == "scale_1_5"
    assert run.scorers[2]["params"]["verdict_format"] == "pass_fail"
    page = bob_client.get(response.url).content.decode()
    assert '<code>judge-strict</code> <span class="muted">llm_judge</span>' in page
    assert "only when exact_match failed" in page


def test_the_form_shows_a_condition_error_on_the_json_field(
    bob_client: Client, dataset: Dataset, demo_target: Target
) -> None:
    specs = [{"kind": "includes", "when": {"scorer": "judge", "passed": True}}]
    data = form_data(dataset, demo_target, scorer_specs=json.dumps(specs))

    response = bob_client.post(reverse("runs:run_new"), data)

    assert response.status_code == 200
    errors = response.context["form"].errors["scorer_specs"]
    assert "no scorer named 'judge' before 'includes'" in errors[0]
    assert "scorers[1].when.scorer" in errors[0]
    assert not Run.objects.exists()


@pytest.mark.parametrize("value", ['{"kind": "includes"}', "[1,"])
def test_the_form_refuses_json_that_is_not_a_list(
    bob_client: Client, dataset: Dataset, demo_target: Target, value: str
) -> None:
    data = form_data(dataset, demo_target, scorer_specs=value)

    response = bob_client.post(reverse("runs:run_new"), data)

    assert response.status_code == 200
    assert "scorer_specs" in response.context["form"].errors
    assert not Run.objects.exists()


def test_the_form_runs_with_json_scorers_only(
    bob_client: Client, dataset: Dataset, demo_target: Target
) -> None:
    specs = [{"kind": "includes", "name": "contains answer"}]
    data = form_data(dataset, demo_target, scorers=[], scorer_specs=json.dumps(specs))

    response = bob_client.post(reverse("runs:run_new"), data)

    assert response.status_code == 302
    assert Run.objects.get().scorer_names == ["contains answer"]


def test_the_form_page_offers_the_json_field(bob_client: Client) -> None:
    page = bob_client.get(reverse("runs:run_new")).content.decode()
    assert 'name="scorer_specs"' in page
    assert 'name="llm_judge__verdict_format"' in page


@pytest.mark.django_db(transaction=True)
def test_the_api_runs_two_judges_one_conditional(
    bob_client: Client, dataset: Dataset, fake_openai: FakeOpenAIServer
) -> None:
    body = {
        "dataset": dataset.pk,
        "target_kind": "python",
        "target_config": {"callable": "runs.targets.examples.echo"},
        "scorers": ["exact_match", *judges(fake_openai.base_url)],
    }
    response = bob_client.post(
        f"{API}/runs", data=body, content_type="application/json"
    )
    assert response.status_code == 201, response.json()
    run = Run.objects.get(pk=response.json()["id"])
    wait_for(lambda: Run.objects.get(pk=run.pk).is_final)

    count = Result.objects.filter(run=run).count()
    strict = Score.objects.filter(result__run=run, scorer="judge-strict")
    # The echo answers the question itself, never the number: exact match fails
    # everywhere, so the strict judge judged every item.
    assert strict.filter(skipped=False).count() == count > 0
    assert (
        Score.objects.filter(result__run=run, scorer="judge-lenient").count() == count
    )
    scores = bob_client.get(f"{API}/runs/{run.pk}/results").json()["items"][0]["scores"]
    judged = next(s for s in scores if s["scorer"] == "judge-lenient")
    assert judged["model"] == "fake-judge"
    assert judged["prompt_tokens"] > 0 and judged["completion_tokens"] > 0


def test_the_api_names_a_bad_condition(bob_client: Client, dataset: Dataset) -> None:
    body = {
        "dataset": dataset.pk,
        "target_kind": "python",
        "target_config": {"callable": "runs.targets.examples.echo"},
        "scorers": [
            "exact_match",
            {"kind": "includes", "when": {"scorer": "exact_match", "passed": "no"}},
        ],
    }
    response = bob_client.post(
        f"{API}/runs", data=body, content_type="application/json"
    )
    assert response.status_code == 400
    assert response.json()["field"] == "scorers[1].when.passed"
    assert not Run.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_the_result_page_shows_the_judge_and_a_skipped_score(
    bob_client: Client, project: Project, fake_openai: FakeOpenAIServer
) -> None:
    dataset = make_dataset(
        project,
        [{"id": "a", "input": "Paris", "expected": "Paris"}],
        name="capitals",
    )
    run = run_create(
        user=None,
        dataset=dataset,
        target_kind="python",
        target_config={"callable": "runs.targets.examples.echo"},
        scorers=["exact_match", *judges(fake_openai.base_url)],
        launch=False,
    )
    async_to_sync(execute_run)(run.pk)
    result = Result.objects.get(run=run)

    page = bob_client.get(
        reverse("runs:result_detail", args=[run.pk, result.pk])
    ).content.decode()

    assert "skipped: exact_match passed" in page
    assert '<span class="badge">skipped</span>' in page
    assert "<code>fake-judge</code>" in page
    assert "Verdict: PASS" in page
