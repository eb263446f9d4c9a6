"""A run of a saved evaluation executed by a worker is told, once it ends,
to the evaluation's hook (the distributed mode's end path)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from runs.evaluations.services import evaluation_run
from runs.models import Project, Run
from tests.distributed.workers import Workers, wait_for
from tests.evaluations.conftest import make_evaluation
from tests.factories import arithmetic_items, make_dataset

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_run_of_an_evaluation_on_a_worker_is_told_when_it_ends(
    workers: Workers, distributed: None, project: Project, bob: User
) -> None:
    dataset = make_dataset(project, arithmetic_items(30))
    evaluation = make_evaluation(project, dataset, bob)
    workers.start(1)
    workers.wait_registered(1)
    run = evaluation_run(evaluation=evaluation, user=bob)

    def told() -> bool:
        run.refresh_from_db()
        return bool(run.evaluation_end)

    wait_for(told, what="the run's end told to its evaluation")
    assert run.is_final
    assert run.evaluation_end == f"{run.revision}:{run.status}"
    assert run.shards.count() == 2  # executed as shards, by the worker
    assert Run.objects.filter(evaluation=evaluation).count() == 1
