"""Runs whose failing items fall in two obvious topics, for content clusters."""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from runs.models import Dataset, Project, Run, RunStatus
from tests.factories import echo_run, make_dataset, store_outcomes

TRAINS = 12
CAKES = 9
PASSING = 6
ODD = ("quantum lattice hyperbolic", "medieval tapestry loom")


def topic_items() -> list[dict[str, Any]]:
    """Trains, cakes, two odd items and some that pass, in that order."""
    trains = [
        {
            "id": f"train{i}",
            "input": f"A train leaves the station at {i} o'clock travelling "
            f"{40 + i} miles per hour. How far has the train gone?",
            "expected": str(i * 7),
        }
        for i in range(TRAINS)
    ]
    cakes = [
        {
            "id": f"cake{i}",
            "input": f"A baker uses {i + 2} cups of flour and sugar for each cake "
            "in the oven. How many cakes can she bake?",
            "expected": str(i + 1),
        }
        for i in range(CAKES)
    ]
    odd = [
        {"id": f"odd{i}", "input": text, "expected": "0"} for i, text in enumerate(ODD)
    ]
    passing = [
        {"id": f"ok{i}", "input": f"Say yes {i}", "expected": "yes"}
        for i in range(PASSING)
    ]
    return trains + cakes + odd + passing


def topic_dataset(project: Project, **kwargs: Any) -> Dataset:
    return make_dataset(project, topic_items(), name="topics", **kwargs)


TIMEOUT = {"error": ("timeout", "Timeout", "the call timed out after 30 s")}
FAIL = {"scores": [("exact_match", False, "answer does not equal expected")]}
PASS = {"scores": [("exact_match", True, "")]}


def topic_run(
    dataset: Dataset,
    *,
    cakes: dict[str, Any] | None = None,
    trains: dict[str, Any] | None = None,
    final: bool = True,
) -> Run:
    """A run where trains and cakes fail (or as given), the odd ones time out
    (no output: nothing but their input to go by) and the rest pass;
    finished unless ``final`` is False."""
    outcomes = [trains or FAIL] * TRAINS + [cakes or FAIL] * CAKES
    outcomes += [TIMEOUT] * len(ODD) + [PASS] * PASSING
    run = store_outcomes(echo_run(dataset), outcomes)
    if final:
        Run.objects.filter(pk=run.pk).update(
            status=RunStatus.COMPLETED, finished_at=timezone.now()
        )
        run.refresh_from_db()
    return run
