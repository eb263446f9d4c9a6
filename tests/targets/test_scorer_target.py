"""The scorer target: a judge measured against human labels, end to end."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User

from runs.analysis.summary import run_summary
from runs.errors import ConfigError, InvalidInput
from runs.executor.engine import execute_run
from runs.models import Project, Result, Run, RunStatus
from runs.plugins import catalogue_entry
from runs.results.services import run_create
from runs.targets import REGISTRY, clean_target_config
from runs.testing.fake_openai import FakeOpenAIServer
from tests.factories import make_dataset, set_bound_secret

KEY = "sk-judge-target-0123456789"
FAST = {"backoff_base_seconds": 0.01, "backoff_max_seconds": 0.05}


def labelled(answer: str, reference: str, label: str, **extra: Any) -> dict:
    """A human label of one answer: the input is the output to judge."""
    return {
        "id": f"{answer}/{reference}",
        "input": answer,
        "expected": label,
        "metadata": {"input": "Capital of France?", "expected": reference, **extra},
    }


def judge_run(
    project: Project,
    items: list[dict[str, Any]],
    base_url: str,
    *,
    user: User | None = None,
    **config: Any,
) -> Run:
    params = {"base_url": base_url, "model": "fake-judge", **FAST}
    params.update(config.pop("params", {}))
    return run_create(
        user=user,
        dataset=make_dataset(project, items, name="labels"),
        target_kind="scorer",
        target_config={"scorer_kind": "llm_judge", "params": params, **config},
        scorers=["exact_match"],
        options={"max_attempts": 1},
        launch=False,
    )


@pytest.mark.django_db(transaction=True)
async def test_exact_match_against_the_labels_gives_the_judges_agreement(
    project: Project, fake_openai: FakeOpenAIServer
) -> None:
    items = [
        labelled("Paris", "Paris", "pass"),
        labelled("Lyon", "Paris", "fail"),
        labelled("paris", "Paris", "pass"),
        labelled("Paris, of course", "Paris", "pass"),  # the judge says fail
    ]
    run = await sync_to_async(judge_run)(project, items, fake_openai.base_url)

    assert await execute_run(run.pk) == RunStatus.COMPLETED
    results = [r async for r in Result.objects.filter(run=run).order_by("item_index")]
    assert [r.output for r in results] == ["pass", "fail", "pass", "fail"]
    assert all(r.prompt_tokens and r.completion_tokens for r in results)
    summary = await sync_to_async(run_summary)(run=run)
    agreement = summary.scorers[0]
    assert (agreement.passed, agreement.results) == (3, 4)
    assert summary.tokens["prompt"] == sum(r.prompt_tokens for r in results)
    assert fake_openai.stats.requests == 4


@pytest.mark.django_db(transaction=True)
async def test_the_value_can_be_the_output(
    project: Project, fake_openai: FakeOpenAIServer
) -> None:
    items = [labelled("Paris", "Paris", "5"), labelled("Nice", "Paris", "5")]
    run = await sync_to_async(judge_run)(
        project,
        items,
        fake_openai.base_url,
        params={"verdict_format": "scale_1_5"},
        output="value",
    )

    assert await execute_run(run.pk) == RunStatus.COMPLETED
    outputs = [
        r.output async for r in Result.objects.filter(run=run).order_by("item_index")
    ]
    assert outputs == [5.0, 1.0]


@pytest.mark.django_db(transaction=True)
async def test_an_unreadable_verdict_is_a_permanent_target_error_keeping_the_reply(
    project: Project, fake_openai: FakeOpenAIServer
) -> None:
    items = [
        labelled("Paris [[unparseable]]", "Paris", "pass"),
        labelled("Paris", "Paris", "pass"),
    ]
    run = await sync_to_async(judge_run)(project, items, fake_openai.base_url)

    assert await execute_run(run.pk) == RunStatus.COMPLETED_WITH_ERRORS
    failed = await Result.objects.aget(run=run, item_index=0)
    assert failed.status == Result.Status.FAILED
    assert (failed.error_kind, failed.error_type) == ("permanent", "ScorerError")
    assert failed.error_message.startswith("unreadable judge reply")
    # Asked for a schema-constrained reply, the endpoint answered JSON that
    # holds no verdict: the reply is kept as it came.
    assert failed.attempts[0]["raw_body"] == '{"answer": "I would rather not say."}'


@pytest.mark.django_db(transaction=True)
async def test_the_judge_key_is_a_project_secret_of_the_target(
    project: Project, alice: User, fake_openai: FakeOpenAIServer
) -> None:
    await sync_to_async(set_bound_secret)(
        project, alice, "JUDGE", KEY, url=fake_openai.base_url
    )
    run = await sync_to_async(judge_run)(
        project,
        [labelled("Paris", "Paris", "pass")],
        fake_openai.base_url,
        user=alice,
        params={"api_key_secret": "JUDGE"},
    )

    assert await execute_run(run.pk) == RunStatus.COMPLETED
    assert fake_openai.stats.authorization == {f"Bearer {KEY}"}
    await run.arefresh_from_db()
    assert KEY not in str(run.target_config)


@pytest.mark.django_db
def test_a_missing_judge_secret_is_named_inside_params(
    project: Project, fake_openai: FakeOpenAIServer
) -> None:
    with pytest.raises(InvalidInput) as caught:
        judge_run(
            project,
            [labelled("Paris", "Paris", "pass")],
            fake_openai.base_url,
            params={"api_key_secret": "ABSENT"},
        )
    assert caught.value.field == "target_config.params.api_key_secret"


@pytest.mark.parametrize(
    ("config", "field", "message"),
    [
        ({"scorer_kind": "nope"}, "config.scorer_kind", "unknown scorer 'nope'"),
        (
            {"scorer_kind": "llm_judge", "params": {"model": "m"}},
            "config.params.base_url",
            "is required",
        ),
        (
            {"scorer_kind": "regex", "params": {"pattern": "("}},
            "config.params.pattern",
            "",
        ),
        (
            {"scorer_kind": "exact_match", "output": "both"},
            "config.output",
            "must be one of",
        ),
    ],
)
def test_bad_configurations_name_the_field(
    config: dict[str, Any], field: str, message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        clean_target_config("scorer", config)
    assert caught.value.field == field
    assert message in caught.value.message


def test_the_catalogue_describes_the_scorer_target() -> None:
    entry = catalogue_entry(REGISTRY["scorer"])  # type: ignore[arg-type]
    assert entry["secrets"] == []  # the wrapped scorer's, named in its params
    assert "human labels" in entry["description"]
    assert entry["example"]["scorer_kind"] == "llm_judge"
