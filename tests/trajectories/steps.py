"""Stored trajectories for tests: results of a run with Step rows, as the
executor would store them."""

from __future__ import annotations

from typing import Any

from runs.models import Result, Run, Step
from runs.plugins.steps import bounded, call_hash
from runs.results.services import run_create
from tests.factories import store_outcomes


def tool_step(name: str, arguments: Any = None, **fields: Any) -> dict[str, Any]:
    return {"kind": "tool", "name": name, "arguments": arguments or {}, **fields}


def model_step(**fields: Any) -> dict[str, Any]:
    fields.setdefault("arguments", [{"role": "user", "content": "go"}])
    return {"kind": "model", "name": "gpt-test", **fields}


def store_steps(
    result: Result, steps: list[dict[str, Any]], indexes: list[int] | None = None
) -> None:
    """Store ``steps`` (Step fields) as the result's trajectory, payloads
    bounded, in this order (their indexes 0, 1, ... unless ``indexes``)."""
    rows = []
    for index, fields in zip(indexes or range(len(steps)), steps, strict=True):
        fields = dict(fields)
        arguments, arguments_bytes = bounded(fields.pop("arguments", None))
        output, output_bytes = bounded(fields.pop("output", None))
        if fields["kind"] == "tool":
            fields.setdefault("call_hash", call_hash(fields["name"], arguments))
        rows.append(
            Step(
                result=result,
                index=index,
                arguments=arguments,
                output=output,
                arguments_bytes=arguments_bytes,
                output_bytes=output_bytes,
                **fields,
            )
        )
    Step.objects.bulk_create(rows, batch_size=1000)
    Run.objects.filter(pk=result.run_id).update(has_steps=True)


def answered_run(dataset: Any, name: str = "agent") -> Run:
    """A run of ``dataset`` with a succeeded result for every item."""
    run = run_create(
        user=None,
        dataset=dataset,
        target_kind="python",
        target_config={"callable": "runs.targets.examples.echo"},
        scorers=["exact_match"],
        name=name,
        launch=False,
    )
    count = dataset.item_count
    return store_outcomes(run, [{"scores": [("exact_match", True, "")]}] * count)


def result_of(run: Run, index: int = 0) -> Result:
    return Result.objects.get(run=run, item_index=index)
