"""Conditional scorers (``when``) and named instances of one kind, in a real run."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async

from runs.errors import ConfigError
from runs.executor.engine import execute_run
from runs.executor.items import ItemRunner
from runs.executor.options import RunOptions
from runs.models import Project, Run, RunStatus, Score
from runs.plugins.scorers import conditions_of
from runs.results.services import run_create
from runs.scorers import build_scorer, clean_scorer_specs
from runs.targets import TargetInput, build_target
from runs.testing.fake_openai import FakeOpenAIServer
from tests.factories import make_dataset

FAST = {"backoff_base_seconds": 0.01, "backoff_max_seconds": 0.05}


def echo_run(project: Project, items: list[dict[str, Any]], scorers: list[Any]) -> Run:
    return run_create(
        user=None,
        dataset=make_dataset(project, items),
        target_kind="python",
        target_config={"callable": "runs.targets.examples.echo"},
        scorers=scorers,
        launch=False,
    )


async def scores_of(run: Run) -> dict[tuple[str, str], Score]:
    """Execute the run; its scores by (item external id, scorer name)."""
    assert await execute_run(run.pk) in (
        RunStatus.COMPLETED,
        RunStatus.COMPLETED_WITH_ERRORS,
    )
    rows = Score.objects.filter(result__run=run).select_related("result__item")
    return {(s.result.item.external_id, s.scorer): s async for s in rows}


def judge(base_url: str, **params: Any) -> dict[str, Any]:
    return {"base_url": base_url, "model": "fake-judge", **FAST, **params}


@pytest.mark.django_db(transaction=True)
async def test_the_judge_runs_only_where_exact_match_failed(
    project: Project, fake_openai: FakeOpenAIServer
) -> None:
    items = [
        {"id": "exact", "input": "Paris", "expected": "Paris"},
        {"id": "close", "input": "paris.", "expected": "Paris"},
        {"id": "wrong", "input": "Lyon", "expected": "Paris"},
    ]
    scorers = [
        "exact_match",
        {
            "kind": "llm_judge",
            "params": judge(fake_openai.base_url),
            "when": {"scorer": "exact_match", "passed": False},
        },
    ]
    run = await sync_to_async(echo_run)(project, items, scorers)
    scores = await scores_of(run)

    skipped = scores[("exact", "llm_judge")]
    assert (skipped.skipped, skipped.passed, skipped.value) == (True, None, None)
    assert skipped.reason == "skipped: exact_match passed"
    assert skipped.error == "" and skipped.reason_signature == ""
    assert scores[("close", "llm_judge")].passed is True
    assert scores[("wrong", "llm_judge")].passed is False
    assert not scores[("close", "llm_judge")].skipped
    assert fake_openai.stats.requests == 2  # only where exact match failed


@pytest.mark.django_db(transaction=True)
async def test_a_condition_on_an_errored_or_skipped_scorer_skips_with_that_reason(
    project: Project,
) -> None:
    items = [
        {"id": "no-answer", "input": "x"},  # exact_match errors: nothing expected
        {"id": "match", "input": "x", "expected": "x"},
        {"id": "miss", "input": "y", "expected": "x"},
    ]
    scorers = [
        "exact_match",
        {
            "kind": "includes",
            "name": "has-x",
            "when": {"scorer": "exact_match", "passed": True},
        },
        {
            "kind": "regex",
            "name": "starts-x",
            "params": {"pattern": "^x"},
            "when": {"scorer": "has-x", "passed": True},
        },
    ]
    run = await sync_to_async(echo_run)(project, items, scorers)
    scores = await scores_of(run)

    assert scores[("no-answer", "exact_match")].error
    assert scores[("no-answer", "has-x")].reason == "skipped: exact_match errored"
    assert scores[("no-answer", "starts-x")].reason == "skipped: has-x was skipped"
    assert scores[("match", "has-x")].passed is True
    assert scores[("match", "starts-x")].passed is True
    assert scores[("miss", "has-x")].reason == "skipped: exact_match failed"
    assert scores[("miss", "starts-x")].skipped
    await run.arefresh_from_db()
    assert run.status == RunStatus.COMPLETED  # skipped scores fail no item


@pytest.mark.django_db(transaction=True)
async def test_two_instances_of_one_kind_run_with_their_own_parameters(
    project: Project, fake_openai: FakeOpenAIServer
) -> None:
    items = [
        {"id": "right", "input": "42", "expected": "42"},
        {"id": "wrong", "input": "41", "expected": "42"},
    ]
    scorers = [
        {
            "kind": "llm_judge",
            "name": "judge-strict",
            "params": judge(fake_openai.base_url, verdict_format="scale_1_5"),
        },
        {
            "kind": "llm_judge",
            "name": "judge-lenient",
            "params": judge(fake_openai.base_url, verdict_format="scale_0_10"),
        },
    ]
    run = await sync_to_async(echo_run)(project, items, scorers)
    scores = await scores_of(run)

    assert scores[("right", "judge-strict")].value == 5.0
    assert scores[("right", "judge-lenient")].value == 10.0
    assert scores[("wrong", "judge-strict")].value == 1.0
    assert scores[("wrong", "judge-lenient")].value == 0.0
    assert run.scorer_names == ["judge-strict", "judge-lenient"]


@pytest.mark.parametrize(
    ("specs", "field", "message"),
    [
        (
            ["exact_match", {"kind": "includes", "when": {"scorer": "nope"}}],
            "scorers[1].when.scorer",
            "no scorer named 'nope' before 'includes'",
        ),
        (
            [{"kind": "includes", "when": {"scorer": "includes", "passed": True}}],
            "scorers[0].when.scorer",
            "cannot depend on itself",
        ),
        (
            [
                {"kind": "includes", "when": {"scorer": "exact_match", "passed": True}},
                {"kind": "exact_match", "when": {"scorer": "includes", "passed": True}},
            ],
            "scorers[0].when.scorer",
            "declared earlier (so that conditions never form a cycle)",
        ),
        (
            ["exact_match", {"kind": "includes", "when": {"scorer": "exact_match"}}],
            "scorers[1].when.passed",
            "must be true or false",
        ),
        (
            [
                "exact_match",
                {
                    "kind": "includes",
                    "when": {"scorer": "exact_match", "passed": "yes"},
                },
            ],
            "scorers[1].when.passed",
            "must be true or false",
        ),
        (
            ["exact_match", {"kind": "includes", "when": "exact_match"}],
            "scorers[1].when",
            "must be an object",
        ),
        (
            [
                "exact_match",
                {"kind": "includes", "when": {"scorer": "exact_match", "failed": 1}},
            ],
            "scorers[1].when.failed",
            "is not a field of when",
        ),
        (
            [{"kind": "includes", "If": {}}],
            "scorers[0].If",
            "is not a field of a scorer",
        ),
        (
            ["includes", {"kind": "includes"}],
            "scorers[1].name",
            "'includes' is used twice",
        ),
        (
            [{"kind": "includes", "name": "  "}],
            "scorers[0].name",
            "must be a non-empty string",
        ),
        (
            [{"kind": "includes", "name": "n" * 101}],
            "scorers[0].name",
            "at most 100 characters",
        ),
    ],
)
def test_bad_conditions_and_names_are_refused_naming_the_field(
    specs: list[Any], field: str, message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        clean_scorer_specs(specs)
    assert caught.value.field == field
    assert message in caught.value.message


def test_a_condition_is_kept_in_the_cleaned_spec() -> None:
    cleaned = clean_scorer_specs(
        [
            "exact_match",
            {
                "kind": "includes",
                "name": " fallback ",
                "when": {"scorer": "exact_match", "passed": False},
            },
        ]
    )
    assert cleaned[1] == {
        "name": "fallback",
        "kind": "includes",
        "params": cleaned[1]["params"],
        "when": {"scorer": "exact_match", "passed": False},
    }
    assert "when" not in cleaned[0]


async def test_a_condition_on_a_scorer_outside_the_pass_skips_instead_of_failing() -> (
    None
):
    """Scoring some of a run's scorers (a re-score) never crashes on a condition."""
    specs = clean_scorer_specs(
        [
            "exact_match",
            {"kind": "includes", "when": {"scorer": "exact_match", "passed": False}},
        ]
    )
    runner = ItemRunner(
        target=build_target("python", {"callable": "runs.targets.examples.echo"}),
        scorers=[build_scorer(specs[1])],
        options=RunOptions(),
        conditions=conditions_of(specs),
    )
    item = TargetInput(index=0, external_id="a", input="x", expected="x")

    [record] = await runner.score("x", item)

    assert (record.scorer, record.skipped) == ("includes", True)
    assert record.reason == "skipped: exact_match did not run"
