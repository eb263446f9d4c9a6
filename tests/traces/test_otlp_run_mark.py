"""Steps taken in from spans mark their run as having steps, and move what is
kept of its results: its summary then shows them."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from runs.analysis.summary import run_summary_cached
from runs.models import Project, Run
from runs.projects.services import api_key_create
from tests.traces.test_otlp import agent_spans, finished_run, post


@pytest.mark.django_db(transaction=True)
def test_spans_mark_the_run_and_its_summary_shows_their_steps(
    client: Client, project: Project, alice: User
) -> None:
    run = finished_run(project)
    assert not run.has_steps
    assert run_summary_cached(run=run).steps is None  # kept for the run
    key = api_key_create(user=alice, name="agent")[1]

    spans = agent_spans({"evalsite.run_id": run.pk, "evalsite.item_index": 1})
    assert post(client, key, spans).status_code == 200

    run = Run.objects.get(pk=run.pk)
    assert run.has_steps
    steps = run_summary_cached(run=run).steps
    assert steps is not None and (steps.steps, steps.tool_calls) == (2, 1)
