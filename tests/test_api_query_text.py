"""Query-string text that a filter compares with a column is refused when it
holds a NUL: PostgreSQL stores no NUL in text, so on it such a filter was an
internal error (500); on SQLite it matched nothing."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from runs.models import Project
from tests.factories import arithmetic_items, echo_run, make_dataset

NUL = "a\x00b"


@pytest.mark.parametrize(
    ("path", "parameter"),
    [("/api/v1/datasets", "name"), ("/api/v1/targets", "kind")],
)
def test_a_list_filter_with_a_nul_is_refused_with_422(
    alice_client: Client, project: Project, path: str, parameter: str
) -> None:
    response = alice_client.get(path, {parameter: NUL})
    assert response.status_code == 422, response.content
    assert "NUL" in response.content.decode()


@pytest.mark.parametrize("parameter", ["external_id", "cluster", "scorer"])
def test_a_results_filter_with_a_nul_is_refused(
    alice_client: Client, project: Project, parameter: str
) -> None:
    run = echo_run(make_dataset(project, arithmetic_items(3)))
    response = alice_client.get(f"/api/v1/runs/{run.pk}/results", {parameter: NUL})
    assert response.status_code == 422, response.content


def test_the_run_page_refuses_a_nul_in_its_filters(
    alice_client: Client, project: Project
) -> None:
    run = echo_run(make_dataset(project, arithmetic_items(3)))
    url = reverse("runs:run_detail", args=[run.pk])
    response = alice_client.get(url, {"external_id": NUL})
    assert response.status_code == 400
    assert "NUL" in response.content.decode()


def test_compared_items_refuse_a_nul_in_the_scorer(
    alice_client: Client, project: Project
) -> None:
    dataset = make_dataset(project, arithmetic_items(3))
    a, b = echo_run(dataset), echo_run(dataset)
    response = alice_client.get(
        "/api/v1/compare/items",
        {"baseline": a.pk, "candidate": b.pk, "scorer": NUL},
    )
    assert response.status_code == 422, response.content
