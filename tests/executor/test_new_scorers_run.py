"""A run through the executor scored by choice, math, json, f1 and python."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from runs.executor.engine import execute_run
from runs.models import Project, Result, Run, RunStatus, Score
from runs.results.services import run_create
from tests.factories import make_dataset

pytestmark = pytest.mark.django_db(transaction=True)

# The python target's echo returns each item's input: stored replies, scored.
REPLIES = [
    {"id": "mc", "input": "The answer is (B).", "expected": "B"},
    {"id": "math", "input": "So $x = \\boxed{\\frac12}$.", "expected": "0.5"},
    {"id": "json", "input": '```json\n{"answer": "Paris"}\n```', "expected": "Paris"},
    {"id": "wrong", "input": "I would say A or C", "expected": "C"},
]
SCORERS = [
    {"kind": "choice", "params": {"letters": "ABCD"}},
    "math",
    {"kind": "json", "params": {"fenced": True, "schema": {"required": ["answer"]}}},
    {"kind": "f1", "name": "overlap", "params": {"threshold": 0.3}},
    {"kind": "python", "params": {"callable": "runs.scorers.examples.non_empty"}},
    {
        "kind": "python",
        "name": "prefix",
        "params": {"callable": "runs.scorers.examples.starts_with_expected"},
    },
]


def create_run(project: Project) -> Run:
    return run_create(
        user=None,
        dataset=make_dataset(project, REPLIES),
        target_kind="python",
        target_config={"callable": "runs.targets.examples.echo"},
        scorers=SCORERS,
        launch=False,
    )


async def test_a_run_stores_each_new_scorers_verdict(project: Project) -> None:
    run = await sync_to_async(create_run)(project)

    status = await execute_run(run.pk)

    assert status == RunStatus.COMPLETED
    scores = {
        (score.result.item_index, score.scorer): (score.passed, score.reason)
        async for score in Score.objects.filter(result__run=run).select_related(
            "result"
        )
    }
    assert await Result.objects.filter(run=run).acount() == 4
    assert len(scores) == 4 * len(SCORERS)
    assert scores[(0, "choice")][0] is True
    assert scores[(1, "math")] == (
        True,
        "answer `1/2 (from \\frac{1}{2})` equals expected `1/2 (from \\frac{1}{2})`",
    )
    assert scores[(2, "json")] == (
        True,
        "valid JSON matching the schema: an object with 1 keys",
    )
    assert scores[(3, "choice")][0] is False
    assert "ambiguous" in scores[(3, "choice")][1]
    assert scores[(0, "python")][0] is True
    assert [scores[(i, "prefix")][0] for i in range(4)] == [False] * 4
    assert scores[(0, "overlap")][0] is True
    assert scores[(0, "overlap")][1].startswith("F1 0.500 (at least 0.3)")
