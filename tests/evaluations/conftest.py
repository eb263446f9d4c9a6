"""An evaluation of the echo target, and a clock the tests move."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.models import User

from runs.evaluations.services import evaluation_create
from runs.models import Dataset, Evaluation, Project, Run, RunStatus

# A Thursday, on a whole minute.
T0 = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)

ECHO = {"callable": "runs.targets.examples.echo"}


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def make_evaluation(
    project: Project, dataset: Dataset, user: User, **extra: object
) -> Evaluation:
    values: dict[str, object] = {
        "name": "nightly",
        "target_kind": "python",
        "target_config": ECHO,
        "scorers": ["exact_match"],
    }
    values.update(extra)
    return evaluation_create(user=user, project=project, dataset=dataset, **values)  # type: ignore[arg-type]  # keyword values of several types


def finish(run: Run, status: str = RunStatus.COMPLETED) -> None:
    """End a run as its executor would have, without executing it."""
    Run.objects.filter(pk=run.pk).update(status=status, finished_at=T0)


@pytest.fixture
def evaluation(project: Project, dataset: Dataset, bob: User) -> Evaluation:
    return make_evaluation(project, dataset, bob)
