"""chain: run B takes run A's outputs as its inputs, item by item, in one project."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext

from runs.errors import ConfigError
from runs.executor.engine import execute_run
from runs.models import Dataset, ErrorKind, Project, Result, Run, RunStatus
from runs.results.services import run_create
from runs.secrets.store import TargetContext
from runs.targets import TargetInput, build_target, clean_target_config
from runs.targets.services import target_create
from runs.testing.fake_openai import FakeOpenAIServer
from runs.testing.key_forms import FORMS, leaks
from tests.factories import make_dataset
from tests.stored_texts import exported_text, store_secret, stored_text

pytestmark = pytest.mark.django_db(transaction=True)
INNER_KEY = "sk-inner-Mv5nC8xK2jP6rT1q"


def questions(count: int, *, failing: tuple[int, ...] = ()) -> list[dict[str, Any]]:
    return [
        {
            "id": f"q{i}",
            "input": f"What is {i} + {i}?" + ("[[status:400]]" if i in failing else ""),
            "expected": str(2 * i),
        }
        for i in range(count)
    ]


def model(fake: FakeOpenAIServer) -> dict[str, Any]:
    return {"kind": "openai_chat", "config": {"base_url": fake.base_url, "model": "m"}}


def first_run(
    dataset: Dataset, fake: FakeOpenAIServer, *, user: User | None = None
) -> Run:
    run = run_create(
        user=user,
        dataset=dataset,
        target_kind="openai_chat",
        target_config=model(fake)["config"],
        scorers=["exact_match"],
        options={"max_attempts": 1},
        launch=False,
    )
    async_to_sync(execute_run)(run.pk)
    run.refresh_from_db()
    return run


def chained(dataset: Dataset, config: dict[str, Any], *, user: User | None = None):
    return run_create(
        user=user,
        dataset=dataset,
        target_kind="chain",
        target_config=config,
        scorers=["exact_match"],
        launch=False,
    )


def test_outputs_flow_from_one_run_into_the_next(project, fake_openai, bob):
    dataset = make_dataset(project, questions(3))
    source = first_run(dataset, fake_openai, user=bob)
    template = "What is {run.output} * 1? ({external_id}: {input})"
    run = chained(
        dataset,
        {"run": source.pk, "target": model(fake_openai), "template": template},
        user=bob,
    )
    assert run.parent_id == source.pk
    assert async_to_sync(execute_run)(run.pk) == RunStatus.COMPLETED
    outputs = list(
        Result.objects.filter(run=run)
        .order_by("item_index")
        .values_list("output", flat=True)
    )
    assert outputs == ["0", "2", "4"]
    assert fake_openai.stats.prompts["What is 4 * 1? (q2: What is 2 + 2?)"] == 1
    assert Result.objects.filter(run=run, scores__passed=True).count() == 3


def test_the_output_itself_is_the_input_by_default(project, fake_openai):
    dataset = make_dataset(project, questions(2))
    source = first_run(dataset, fake_openai)
    replay = {"kind": "python", "config": {"callable": "runs.targets.examples.echo"}}
    run = chained(dataset, {"run": source.pk, "target": replay})
    async_to_sync(execute_run)(run.pk)
    outputs = list(
        Result.objects.filter(run=run)
        .order_by("item_index")
        .values_list("output", flat=True)
    )
    assert outputs == ["0", "2"]


def test_an_item_without_a_source_output_fails_naming_the_run(project, fake_openai):
    dataset = make_dataset(project, questions(3, failing=(1,)))
    source = first_run(dataset, fake_openai)
    assert source.status == RunStatus.COMPLETED_WITH_ERRORS
    run = chained(dataset, {"run": source.pk, "target": model(fake_openai)})
    async_to_sync(execute_run)(run.pk)
    missing = Result.objects.get(run=run, item_index=1)
    assert (missing.error_kind, missing.error_type) == (
        ErrorKind.PERMANENT,
        "NoSourceOutput",
    )
    assert missing.error_message == f"run {source.pk} has no output for this item"
    assert len(missing.attempts) == 1
    assert Result.objects.filter(run=run, status="succeeded").count() == 2


def test_a_run_of_another_project_is_refused_as_if_it_did_not_exist(
    project, other_project, fake_openai, bob
):
    theirs = first_run(make_dataset(other_project, questions(1)), fake_openai)
    ours = make_dataset(project, questions(1))
    with pytest.raises(ConfigError) as foreign:
        chained(ours, {"run": theirs.pk, "target": model(fake_openai)}, user=bob)
    with pytest.raises(ConfigError) as absent:
        chained(ours, {"run": theirs.pk + 1000, "target": model(fake_openai)}, user=bob)
    assert foreign.value.field == absent.value.field == "target_config.run"
    assert foreign.value.message == f"there is no run {theirs.pk} in Research"
    assert absent.value.message == f"there is no run {theirs.pk + 1000} in Research"
    assert Run.objects.filter(project=project).count() == 0


def test_a_run_over_another_dataset_is_refused(project, fake_openai):
    source = first_run(make_dataset(project, questions(2)), fake_openai)
    other = make_dataset(project, questions(2), name="other")
    with pytest.raises(ConfigError, match="over another dataset") as caught:
        chained(other, {"run": source.pk, "target": model(fake_openai)})
    assert caught.value.field == "target_config.run"


def test_an_unfinished_run_is_refused(project, fake_openai):
    dataset = make_dataset(project, questions(1))
    pending = run_create(
        user=None,
        dataset=dataset,
        target_kind="openai_chat",
        target_config=model(fake_openai)["config"],
        scorers=["exact_match"],
        launch=False,
    )
    with pytest.raises(ConfigError, match="has not finished"):
        chained(dataset, {"run": pending.pk, "target": model(fake_openai)})


def test_a_saved_target_is_frozen_into_the_run(
    project, other_project, fake_openai, alice
):
    dataset = make_dataset(project, questions(1))
    source = first_run(dataset, fake_openai)
    saved = target_create(
        project=project, user=alice, name="model", **model(fake_openai)
    )
    run = chained(dataset, {"run": source.pk, "target": {"id": saved.pk}})
    assert run.target_config["target"]["kind"] == "openai_chat"
    assert run.target_config["target"]["config"]["base_url"] == fake_openai.base_url
    theirs = Project.objects.get(pk=other_project.pk)
    foreign = target_create(
        project=theirs,
        user=theirs.memberships.get().user,
        name="m",
        **model(fake_openai),
    )
    with pytest.raises(ConfigError) as caught:
        chained(dataset, {"run": source.pk, "target": {"id": foreign.pk}})
    assert caught.value.field == "target_config.target.id"


def test_the_chained_targets_secret_must_be_bound(project, fake_openai):
    dataset = make_dataset(project, questions(1))
    source = first_run(dataset, fake_openai)
    target = model(fake_openai)
    target["config"]["api_key_secret"] = "NOT_SET"
    with pytest.raises(Exception) as caught:
        chained(dataset, {"run": source.pk, "target": target})
    assert caught.value.field == "target_config.target.config.api_key_secret"


@pytest.mark.parametrize(
    ("config", "field"),
    [
        ({"template": "{run.outputs}"}, "config.template"),
        ({"template": "{data.x}"}, "config.template"),
        ({"target": {"kind": "chain", "config": {}}}, "config.target.kind"),
        ({"target": {"kind": "nope"}}, "config.target.kind"),
        (
            {"target": {"kind": "openai_chat", "config": {"model": "m"}}},
            "config.target.config.base_url",
        ),
        ({"target": {"id": "five"}}, "config.target.id"),
        ({"run": 0}, "config.run"),
    ],
)
def test_bad_chain_configurations_name_the_field(config, field):
    base = {"run": 1, "target": {"kind": "python", "config": {"callable": "x"}}}
    base["target"]["config"]["callable"] = "runs.targets.examples.echo"
    with pytest.raises(ConfigError) as caught:
        clean_target_config("chain", {**base, **config})
    assert caught.value.field == field


def test_one_indexed_query_per_item_reads_the_source_output(project, fake_openai):
    dataset = make_dataset(project, questions(3))
    source = first_run(dataset, fake_openai)
    config = clean_target_config(
        "chain", {"run": source.pk, "target": model(fake_openai)}
    )
    target = build_target("chain", config, context=TargetContext(project_id=project.pk))
    with CaptureQueriesContext(connection) as queries:
        assert target.source_output(2) == ["4"]
    (query,) = queries.captured_queries
    assert "LIMIT 1" in query["sql"]
    assert '"item_index" = 2' in query["sql"]


def test_an_inner_target_item_sees_the_item_fields(project, fake_openai):
    """The chained input replaces only the input: expected and metadata stay."""
    dataset = make_dataset(
        project,
        [
            {
                "id": "x",
                "input": "What is 1 + 1?",
                "expected": "2",
                "metadata": {"k": "v"},
            }
        ],
    )
    source = first_run(dataset, fake_openai)
    config = clean_target_config(
        "chain",
        {
            "run": source.pk,
            "target": {
                "kind": "openai_chat",
                "config": {
                    "base_url": fake_openai.base_url,
                    "model": "m",
                    "prompt_template": "{input} / {metadata.k}",
                },
            },
            "template": "answer={run.output}",
        },
    )
    target = build_target("chain", config, context=TargetContext(project_id=project.pk))
    item = TargetInput(index=0, external_id="x", input="q", metadata={"k": "v"})
    output = async_to_sync(target.generate)(item).output
    async_to_sync(target.aclose)()
    assert output == "answer=2 / v"


def test_the_api_refuses_another_projects_run_naming_the_field(
    project, other_project, fake_openai, bob_client
):
    theirs = first_run(make_dataset(other_project, questions(1)), fake_openai)
    ours = make_dataset(project, questions(1))
    response = bob_client.post(
        "/api/v1/runs",
        {
            "dataset": ours.pk,
            "target_kind": "chain",
            "target_config": {"run": theirs.pk, "target": model(fake_openai)},
            "scorers": ["exact_match"],
        },
        content_type="application/json",
    )
    assert response.status_code == 400
    body = response.json()
    assert body["field"] == "target_config.run"
    assert body["detail"].endswith(f"there is no run {theirs.pk} in Research")
    assert "Elsewhere" not in body["detail"]


def test_the_chained_targets_echoed_key_is_stored_in_no_form(
    project, fake_openai, alice
):
    store_secret(project, alice, "INNER", INNER_KEY, url=fake_openai.base_url)
    items = [
        {"id": f"{form}-{n}", "input": "hi", "expected": "hi", "metadata": {"m": m}}
        for form in FORMS
        for n, m in enumerate(
            (f"[[echo_key:{form}]]", f"[[status:401]][[echo_key:{form}]]")
        )
    ]
    dataset = make_dataset(project, items)
    source = first_run(dataset, fake_openai, user=alice)
    inner = model(fake_openai)
    inner["config"]["api_key_secret"] = "INNER"
    template = "{run.output} {metadata.m}"
    run = chained(
        dataset, {"run": source.pk, "target": inner, "template": template}, user=alice
    )

    assert async_to_sync(execute_run)(run.pk) == RunStatus.COMPLETED_WITH_ERRORS

    assert fake_openai.stats.authorization == {f"Bearer {INNER_KEY}"}
    stored = stored_text(run)
    assert leaks(stored, INNER_KEY) == []
    assert leaks(exported_text(run), INNER_KEY) == []
    assert stored.count("[redacted secret api_key]") >= 2 * len(FORMS)
