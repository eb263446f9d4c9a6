"""What a first view of a run's page costs, by count: the templates its
results table renders do not grow with its rows (each row is rendered in
Python, ``runs/templatetags/result_rows.py``)."""

from __future__ import annotations

import pytest
from django.core.cache import caches
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from runs.analysis.figures import run_figures_store
from runs.models import Dataset, Run, RunStatus
from tests.factories import arithmetic_items, echo_run, make_dataset, store_outcomes

pytestmark = pytest.mark.django_db


def _ended_run(dataset: Dataset, results: int) -> Run:
    run = echo_run(dataset)
    store_outcomes(
        run,
        [
            {"scores": [("exact_match", n % 3 == 0, f"got {n}")]}
            if n % 5
            else {"error": ("permanent", "HTTPError", f"status 400 for {n}")}
            for n in range(results)
        ],
    )
    Run.objects.filter(pk=run.pk).update(
        status=RunStatus.COMPLETED, finished_at=timezone.now()
    )
    run_figures_store(run.pk)
    return run


def _templates_rendered(client: Client, run: Run) -> list[str]:
    for cache in caches.all():
        cache.clear()
    response = client.get(reverse("runs:run_detail", args=[run.pk]))
    assert response.status_code == 200
    return [template.name for template in response.templates]


def test_results_table_renders_no_template_per_row(bob_client: Client, project) -> None:
    few = _ended_run(make_dataset(project, arithmetic_items(3), name="few"), 3)
    many = _ended_run(make_dataset(project, arithmetic_items(60), name="many"), 60)

    rendered_few = _templates_rendered(bob_client, few)
    rendered_many = _templates_rendered(bob_client, many)

    page = bob_client.get(reverse("runs:run_detail", args=[many.pk])).content
    assert page.decode().count("<tr data-result-id=") == 50  # a page of results
    assert sorted(rendered_many) == sorted(rendered_few)
