"""Every API operation against its own OpenAPI schema: generated requests, a
bearer key, a database with data. Zero server errors, zero schema violations.

Every response check runs except ``positive_data_acceptance``: the schema
cannot say everything the services refuse (a name of spaces, a project one is
not a member of), and those refusals are 400/404 answers, not violations.

Bounded (a few examples per operation, a fixed derandomised seed) so that it
stays a fast, repeatable part of the suite.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from django.contrib.auth.models import User
from django.core.handlers.wsgi import WSGIHandler
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from hypothesis import HealthCheck, settings
from schemathesis import checks

from runs.api import api
from runs.models import Dataset, Project, Run, RunStatus
from runs.projects.services import api_key_create
from runs.results.services import run_create
from runs.results.trajectory import TrajectoryTotals
from runs.targets.services import target_create
from runs.targets.trial import TargetTry

MAX_EXAMPLES = 10

schema = schemathesis.openapi.from_dict(api.get_openapi_schema())
schema.app = WSGIHandler()


@pytest.fixture
def keep_test_connection() -> Iterator[None]:
    """As Django's test client does: a request must not close the connection
    that holds the test's transaction."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture
def bearer(alice: User, project: Project, dataset: Dataset) -> dict[str, str]:
    """alice's key, and a project with a dataset, a target and a finished run."""
    target = target_create(
        project=project,
        user=alice,
        name="echo",
        kind="python",
        config={"callable": "runs.targets.examples.echo"},
    )
    run = run_create(
        user=alice,
        dataset=dataset,
        target=target,
        scorers=["exact_match"],
        launch=False,
    )
    Run.objects.filter(pk=run.pk).update(status=RunStatus.COMPLETED)
    _, plain = api_key_create(user=alice, name="schemathesis")
    return {"Authorization": f"Bearer {plain}"}


@pytest.mark.django_db
@schema.parametrize()
@settings(
    max_examples=MAX_EXAMPLES,
    derandomize=True,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
def test_api_conforms_to_its_schema(
    case: Any, bearer: dict[str, str], keep_test_connection: None
) -> None:
    case.call_and_validate(
        headers=bearer, excluded_checks=[checks.positive_data_acceptance]
    )


@pytest.mark.parametrize(
    ("value", "documented"),
    [(TargetTry, {"ok", "output"}), (TrajectoryTotals, {"latency_ms"})],
)
def test_a_value_returned_as_it_is_documents_every_field_as_sent(
    value: type, documented: set[str]
) -> None:
    # The try endpoint and a trajectory's totals return these dataclasses as
    # their schemas: every field is in every answer (a default included), and
    # a field's description reaches the documentation.
    component = api.get_openapi_schema()["components"]["schemas"][value.__name__]

    fields = {field.name for field in dataclasses.fields(value)}
    assert set(component["required"]) == set(component["properties"]) == fields
    assert all(component["properties"][name]["description"] for name in documented)
