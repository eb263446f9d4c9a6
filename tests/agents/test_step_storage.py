"""Steps are stored with their result: bounded, hashed, once, and replaced
with the result on a retry (``runs.records.step_rows`` through ``results_write``)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from django.test import Client

from runs.executor import store
from runs.executor.store import ResultRecord
from runs.models import Dataset, Item, Result, Run, Step
from runs.models.steps import STEP_PAYLOAD_BYTES
from runs.plugins.steps import Step as StepRecord
from runs.plugins.steps import call_hash
from runs.records import rows
from runs.results.services import run_create

T0 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
API = "/api/v1"


@pytest.fixture
def run(dataset: Dataset) -> Run:
    return run_create(
        user=None,
        dataset=dataset,
        target_kind="python",
        target_config={"callable": "runs.targets.examples.echo"},
        scorers=["exact_match"],
        launch=False,
    )


def record(run: Run, index: int, steps: list[StepRecord], status: str = "succeeded"):
    item = Item.objects.get(dataset_id=run.dataset_id, index=index)
    return ResultRecord(
        item_id=item.pk,
        item_index=index,
        epoch=0,
        status=status,
        output="x",
        attempts=[{"number": 1, "outcome": "ok"}],
        started_at=T0,
        finished_at=T0,
        steps=steps,
    )


def trajectory(names: list[str]) -> list[StepRecord]:
    steps = [StepRecord(kind="model", name="m", prompt_tokens=3, completion_tokens=1)]
    steps += [StepRecord(kind="tool", name=n, arguments={"q": n}) for n in names]
    return steps


def stored(run: Run, index: int) -> list[tuple[int, str, str]]:
    result = Result.objects.get(run=run, item_index=index)
    return list(result.steps.order_by("index").values_list("index", "kind", "name"))


@pytest.mark.django_db
def test_steps_are_stored_in_order_bounded_and_hashed(run: Run) -> None:
    big = {"text": "é" * STEP_PAYLOAD_BYTES}
    steps = [
        StepRecord(kind="model", name="gpt", arguments=[{"role": "user"}]),
        StepRecord(kind="tool", name="search", arguments=big, output=None),
    ]
    assert store.results_write(run.pk, [record(run, 0, steps)]) == 1

    model, tool = Step.objects.order_by("index")
    assert (model.kind, model.call_hash, model.model) == ("model", "", "gpt")
    size = len(json.dumps(big, separators=(",", ":"), ensure_ascii=False).encode())
    assert tool.arguments_bytes == size > STEP_PAYLOAD_BYTES
    assert tool.cut and isinstance(tool.arguments, str)
    assert len(tool.arguments.encode()) <= STEP_PAYLOAD_BYTES
    assert tool.call_hash == call_hash("search", big)
    assert tool.model == ""


@pytest.mark.django_db
def test_a_result_stored_twice_keeps_one_trajectory(run: Run) -> None:
    store.results_write(run.pk, [record(run, 0, trajectory(["a"]))])
    # Another executor of the run stored the same item: skipped, steps too.
    assert store.results_write(run.pk, [record(run, 0, trajectory(["b", "c"]))]) == 0
    assert stored(run, 0) == [(0, "model", "m"), (1, "tool", "a")]


@pytest.mark.django_db
def test_a_retry_that_replaces_a_result_replaces_its_steps(run: Run) -> None:
    store.results_write(run.pk, [record(run, 0, trajectory(["a", "b"]), "failed")])
    rows.retry_mark(Result.objects.filter(run=run))

    store.results_write(run.pk, [record(run, 0, trajectory(["c"]))])

    assert stored(run, 0) == [(0, "model", "m"), (1, "tool", "c")]
    assert Step.objects.count() == 2


@pytest.mark.django_db
def test_a_retry_that_keeps_an_answer_keeps_its_steps(run: Run) -> None:
    store.results_write(run.pk, [record(run, 0, trajectory(["a"]))])
    result = Result.objects.get(run=run)
    result.scores.create(scorer="exact_match", value=1.0, passed=True)
    rows.retry_mark(Result.objects.filter(run=run))

    store.results_write(run.pk, [record(run, 0, trajectory(["z"]), "failed")])

    assert Result.objects.get(run=run).status == "succeeded"
    assert stored(run, 0) == [(0, "model", "m"), (1, "tool", "a")]


# -- GET /api/v1/results/{id}/trajectory and /api/v1/tools ---------------------------


@pytest.mark.django_db
def test_the_trajectory_is_read_page_by_page(run: Run, victor_client: Client) -> None:
    names = [f"t{n}" for n in range(250)]
    store.results_write(run.pk, [record(run, 0, trajectory(names))])
    result = Result.objects.get(run=run)

    response = victor_client.get(f"{API}/results/{result.pk}/trajectory", {"page": 2})

    assert response.status_code == 200
    body = response.json()
    totals = body["totals"]
    assert (totals["steps"], totals["tool_calls"], body["run"]) == (251, 250, run.pk)
    assert (body["page"], body["pages"], body["per_page"]) == (2, 2, 200)
    assert [s["index"] for s in body["steps"]][:3] == [200, 201, 202]
    assert [s["name"] for s in body["steps"]][:3] == ["t199", "t200", "t201"]
    assert body["steps"][0]["call_hash"] == call_hash("t199", {"q": "t199"})


@pytest.mark.django_db
def test_another_projects_trajectory_is_not_found(
    run: Run, mallory_client: Client
) -> None:
    store.results_write(run.pk, [record(run, 0, trajectory(["a"]))])
    result = Result.objects.get(run=run)

    response = mallory_client.get(f"{API}/results/{result.pk}/trajectory")
    missing = mallory_client.get(f"{API}/results/{result.pk + 1000}/trajectory")

    assert response.status_code == missing.status_code == 404
    assert response.json()["detail"] == f"no result {result.pk}"


@pytest.mark.django_db
def test_the_tools_catalogue_lists_every_tool_kind(bob_client: Client) -> None:
    response = bob_client.get(f"{API}/tools")

    assert response.status_code == 200
    kinds = {tool["kind"]: tool for tool in response.json()}
    assert set(kinds) >= {"http", "python", "code", "final_answer"}
    assert kinds["final_answer"]["final"] is True
    assert kinds["http"]["secrets"] == ["auth_secret", "auth_env"]
    assert "url" in kinds["http"]["parameters"]["properties"]


def test_the_tools_catalogue_needs_a_login(client: Client) -> None:
    assert client.get(f"{API}/tools").status_code == 401


@pytest.mark.django_db
def test_a_payload_that_is_not_json_is_stored_by_its_type(run: Run) -> None:
    steps = [StepRecord(kind="tool", name="f", arguments={"fn": len}, output={1, 2})]
    store.results_write(run.pk, [record(run, 0, steps)])

    step = Step.objects.get()
    assert step.arguments == {"fn": "<builtin_function_or_method>"}
    assert step.output == "<set>"
    assert step.call_hash == call_hash("f", {"fn": print})


@pytest.mark.django_db
def test_the_catalogue_page_lists_the_tools(bob_client: Client) -> None:
    response = bob_client.get("/catalogue/")

    assert response.status_code == 200
    text = response.content.decode()
    assert "Tools" in text
    assert "EVALSITE_PYTHON_TOOLS" in text  # the python tool's parameter help
