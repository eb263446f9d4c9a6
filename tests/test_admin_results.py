"""What the admin changes in a run's results moves its results_version: the
summary and the run's page, cached under that version, show the change."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from runs.models import Dataset, Project, Result, Run, Score
from tests.factories import arithmetic_items, make_dataset
from tests.stored_runs import stored_run

pytestmark = pytest.mark.django_db

API = "/api/v1"


@pytest.fixture
def root_client(project: Project) -> Client:
    root = User.objects.create_superuser("root", "root@example.org", "pw")
    client = Client()
    client.force_login(root)
    return client


@pytest.fixture
def finished(project: Project) -> Run:
    dataset: Dataset = make_dataset(project, arithmetic_items(12), name="twelve")
    run, _stored = stored_run(dataset, seed=3)
    return run


def _summary(client: Client, run: Run) -> dict:
    response = client.get(f"{API}/runs/{run.pk}/summary")
    assert response.status_code == 200
    return response.json()


def _results(summary: dict) -> int:
    return summary["scorers"][0]["results"]


def test_deleting_a_result_in_the_admin_shows_in_the_summary(
    root_client: Client, bob_client: Client, finished: Run
) -> None:
    before = _results(_summary(bob_client, finished))
    result = Result.objects.filter(run=finished).first()
    assert result is not None

    response = root_client.post(
        f"/admin/runs/result/{result.pk}/delete/", {"post": "yes"}
    )

    assert response.status_code == 302
    assert not Result.objects.filter(pk=result.pk).exists()
    assert _results(_summary(bob_client, finished)) == before - 1


def test_deleting_results_by_the_admin_action_shows_in_the_summary(
    root_client: Client, bob_client: Client, finished: Run
) -> None:
    before = _results(_summary(bob_client, finished))
    chosen = list(Result.objects.filter(run=finished).values_list("pk", flat=True)[:3])

    response = root_client.post(
        "/admin/runs/result/",
        {"action": "delete_selected", "_selected_action": chosen, "post": "yes"},
    )

    assert response.status_code == 302
    assert _results(_summary(bob_client, finished)) == before - 3


def test_deleting_scores_in_the_admin_shows_in_the_summary(
    root_client: Client, bob_client: Client, finished: Run
) -> None:
    scored = _summary(bob_client, finished)["scorers"][0]["scored"]
    score = Score.objects.filter(result__run=finished, scorer="exact_match").first()
    assert score is not None
    others = list(
        Score.objects.filter(result__run=finished, scorer="exact_match")
        .exclude(pk=score.pk)
        .values_list("pk", flat=True)[:2]
    )

    root_client.post(f"/admin/runs/score/{score.pk}/delete/", {"post": "yes"})
    root_client.post(
        "/admin/runs/score/",
        {"action": "delete_selected", "_selected_action": others, "post": "yes"},
    )

    assert _summary(bob_client, finished)["scorers"][0]["scored"] == scored - 3


def test_changing_a_score_in_the_admin_moves_the_runs_results_version(
    root_client: Client, finished: Run
) -> None:
    score = Score.objects.filter(result__run=finished).first()
    assert score is not None
    version = finished.results_version
    form = (
        root_client.get(f"/admin/runs/score/{score.pk}/change/")
        .context["adminform"]
        .form
    )
    data = {
        name: "" if value is None else value
        for name, value in form.initial.items()
        if name in form.fields
    }
    data["model"] = "changed-model"

    response = root_client.post(f"/admin/runs/score/{score.pk}/change/", data)

    assert response.status_code == 302
    assert Score.objects.get(pk=score.pk).model == "changed-model"
    finished.refresh_from_db()
    assert finished.results_version != version


def test_the_run_page_shows_a_result_deleted_in_the_admin(
    root_client: Client, bob_client: Client, finished: Run
) -> None:
    result = Result.objects.filter(run=finished).order_by("item_index").first()
    assert result is not None
    page = f"/runs/{finished.pk}/"
    # The row's own marker, not the bare external id: a two-character id such
    # as "q0" can turn up inside the page's random CSRF token.
    row = f'data-result-id="{result.pk}"'
    assert row in bob_client.get(page).content.decode()

    root_client.post(f"/admin/runs/result/{result.pk}/delete/", {"post": "yes"})

    assert row not in bob_client.get(page).content.decode()
