"""replay: the item's own field, or a constant, as the output; no call made."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async

from runs.errors import ConfigError
from runs.executor.engine import execute_run
from runs.models import ErrorKind, Result, RunStatus, Score
from runs.results.services import run_create
from runs.targets import TargetError, TargetInput, build_target, clean_target_config
from tests.factories import make_dataset

ITEM = TargetInput(
    index=0,
    external_id="p1",
    input={"prompt": "def f():", "completion": "    return 1"},
    expected="Paris",
    metadata={"answer": {"value": 42, "alternatives": ["forty-two", "42"]}},
)


async def replay(config: dict[str, Any], item: TargetInput = ITEM) -> Any:
    target = build_target("replay", clean_target_config("replay", config))
    return (await target.generate(item)).output


@pytest.mark.parametrize(
    ("field", "output"),
    [
        ("expected", "Paris"),
        ("metadata.answer.value", 42),
        ("metadata.answer.alternatives.1", "42"),
        ("input.completion", "    return 1"),
        ("external_id", "p1"),
        ("input", {"prompt": "def f():", "completion": "    return 1"}),
    ],
)
async def test_a_field_is_replayed_with_its_type(field, output):
    assert await replay({"field": field}) == output


@pytest.mark.parametrize("value", ["a constant ✓", 0, [1, 2], {"k": "v"}, "", False])
async def test_a_constant_is_replayed(value):
    assert await replay({"value": value}) == value


@pytest.mark.parametrize(
    "config",
    [{}, {"field": "expected", "value": "x"}, {"value": None}],
)
def test_exactly_one_of_field_and_value(config):
    with pytest.raises(ConfigError, match="exactly one of field and value") as caught:
        clean_target_config("replay", config)
    assert caught.value.field == "config.field"


@pytest.mark.parametrize("field", ["answer", "expected..x", "__class__", " "])
def test_a_field_that_is_not_an_item_field_is_refused(field):
    with pytest.raises(ConfigError) as caught:
        clean_target_config("replay", {"field": field})
    assert caught.value.field == "config.field"


async def test_a_missing_field_is_a_permanent_error_naming_it():
    with pytest.raises(TargetError) as caught:
        await replay({"field": "metadata.answer.text"})
    error = caught.value
    assert (error.kind, error.error_type) == (ErrorKind.PERMANENT, "MissingField")
    assert error.message == (
        "item 'p1' has no metadata.answer.text (metadata.answer is an object "
        "with keys value, alternatives)"
    )


async def test_a_null_field_is_an_error_not_an_empty_output():
    item = TargetInput(index=0, external_id="p2", input="q", expected=None)
    with pytest.raises(TargetError, match="item 'p2' has no expected"):
        await replay({"field": "expected"}, item)


@pytest.mark.django_db(transaction=True)
async def test_a_score_only_run_over_stored_answers(project):
    items = [
        {"id": "a", "input": "q", "expected": "x", "metadata": {"answer": "x"}},
        {"id": "b", "input": "q", "expected": "y", "metadata": {"answer": "z"}},
        {"id": "c", "input": "q", "expected": "y"},
    ]
    dataset = await sync_to_async(make_dataset)(project, items)
    run = await sync_to_async(run_create)(
        user=None,
        dataset=dataset,
        target_kind="replay",
        target_config={"field": "metadata.answer"},
        scorers=["exact_match"],
        launch=False,
    )
    assert await execute_run(run.pk) == RunStatus.COMPLETED_WITH_ERRORS
    passed = [
        s.passed
        async for s in Score.objects.filter(result__run=run).order_by(
            "result__item_index"
        )
    ]
    assert passed == [True, False]
    missing = await Result.objects.aget(run=run, item_index=2)
    assert (
        missing.error_message
        == "item 'c' has no metadata.answer (metadata is an empty object)"
    )
    assert len(missing.attempts) == 1
