"""The clusters page's "By content" tab, and saving a content cluster."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from runs.analysis.content_clusters import run_content_clusters
from runs.models import Dataset, Item, Project, Run
from tests.content_runs import CAKES, ODD, TIMEOUT, TRAINS, topic_dataset, topic_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def run(project: Project) -> Run:
    return topic_run(topic_dataset(project), cakes=TIMEOUT)


def _page(client: Client, run: Run, **query: object):
    return client.get(reverse("runs:run_clusters", args=[run.pk]), query)


def test_the_tab_shows_each_content_cluster_and_the_unclustered(
    alice_client: Client, run: Run
) -> None:
    response = _page(alice_client, run, by="content")
    assert response.status_code == 200
    page = response.content.decode()
    trains, cakes = run_content_clusters(run=run).clusters
    assert f'data-cluster="{trains.key}"' in page
    assert f'data-cluster="{cakes.key}"' in page
    assert trains.name in page
    assert f"<strong>{TRAINS}</strong> results" in page
    assert "data-unclustered" in page and f"<strong>{len(ODD)}</strong>" in page
    assert 'aria-current="page">By content' in page


def test_retry_is_offered_for_a_cluster_of_errors_only(
    bob_client: Client, run: Run
) -> None:
    page = _page(bob_client, run, by="content").content.decode()
    trains, cakes = run_content_clusters(run=run).clusters
    assert f"/runs/{run.pk}/retry/?cluster={cakes.key.replace(':', '%3A')}" in page
    assert f"retry/?cluster={trains.key.replace(':', '%3A')}" not in page


def test_the_signature_tab_links_to_the_content_tab(
    alice_client: Client, run: Run
) -> None:
    page = _page(alice_client, run).content.decode()
    assert "?by=content" in page and 'id="error-clusters"' in page


def test_an_outsider_gets_404(mallory_client: Client, run: Run) -> None:
    assert _page(mallory_client, run, by="content").status_code == 404


def test_save_a_content_cluster_as_a_dataset(bob_client: Client, run: Run) -> None:
    cakes = run_content_clusters(run=run).clusters[1]
    response = bob_client.post(
        reverse("runs:run_cluster_save", args=[run.pk]),
        {"cluster": cakes.key, "name": "cakes"},
    )
    assert response.status_code == 302
    dataset = Dataset.objects.get(name="cakes")
    ids = list(
        Item.objects.filter(dataset=dataset).values_list("external_id", flat=True)
    )
    assert ids == [f"cake{i}" for i in range(CAKES)]


def test_a_stale_content_key_saves_nothing_and_says_why(
    bob_client: Client, run: Run
) -> None:
    response = bob_client.post(
        reverse("runs:run_cluster_save", args=[run.pk]),
        {"cluster": "content:0123456789ab", "name": "stale"},
        follow=True,
    )
    assert not Dataset.objects.filter(name="stale").exists()
    assert "could not be saved" in response.content.decode()
    assert response.redirect_chain[-1][0].endswith("?by=content")


def test_the_retry_page_of_a_content_cluster_counts_its_results(
    bob_client: Client, run: Run
) -> None:
    cakes = run_content_clusters(run=run).clusters[1]
    response = bob_client.get(
        reverse("runs:run_retry", args=[run.pk]), {"cluster": cakes.key}
    )
    assert response.status_code == 200
    assert response.context["plan"].rewrites == CAKES
