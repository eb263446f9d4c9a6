"""Content clusters from a project's embeddings endpoint (the fake server's)."""

from __future__ import annotations

import socket

import pytest
from django.test import Client

from runs.analysis.content_clusters import run_content_clusters
from runs.analysis.embeddings import embed_texts
from runs.models import Project, Run
from runs.testing.fake_embeddings import vector
from tests.content_runs import CAKES, TRAINS, topic_dataset, topic_run
from tests.factories import set_bound_secret

API = "/api/v1"
pytestmark = pytest.mark.django_db


def _put(client: Client, project: Project, **body: object):
    return client.put(
        f"{API}/projects/{project.pk}/embeddings", body, content_type="application/json"
    )


@pytest.fixture
def keyed(project: Project, alice, fake_openai) -> Project:
    set_bound_secret(project, alice, "EMBED_KEY", "sk-embed", url=fake_openai.base_url)
    return project


def test_the_fake_server_answers_deterministic_vectors(keyed, fake_openai) -> None:
    config = {
        "base_url": fake_openai.base_url,
        "model": "embed-small",
        "api_key_secret": "EMBED_KEY",
    }
    texts = [f"text number {i}" for i in range(300)]  # two batches
    vectors = embed_texts(project_id=keyed.pk, config=config, texts=texts)
    assert vectors.shape == (300, 64)
    assert vectors[7].tolist() == vector(texts[7])
    assert "Bearer sk-embed" in fake_openai.stats.authorization


def test_clusters_come_from_the_projects_endpoint(
    alice_client: Client, keyed: Project, fake_openai
) -> None:
    response = _put(
        alice_client,
        keyed,
        base_url=fake_openai.base_url,
        model="embed-small",
        api_key_secret="EMBED_KEY",
    )
    assert response.status_code == 200, response.content
    run = topic_run(topic_dataset(keyed))
    body = alice_client.get(f"{API}/runs/{run.pk}/clusters", {"by": "content"}).json()
    assert body["vectoriser"] == f"embeddings:embed-small@{fake_openai.base_url}"
    assert body["note"] == ""
    assert sorted(c["count"] for c in body["clusters"]) == [CAKES, TRAINS]
    assert fake_openai.stats.requests >= 1


def test_an_endpoint_that_fails_falls_back_to_tfidf_and_says_so(
    keyed: Project, alice
) -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    set_bound_secret(keyed, alice, "GONE_KEY", "sk-gone", url=url)
    keyed.embeddings = {"base_url": url, "model": "m", "api_key_secret": "GONE_KEY"}
    keyed.save()
    run: Run = topic_run(topic_dataset(keyed))
    found = run_content_clusters(run=run)
    assert found.vectoriser == "tfidf"
    assert "embeddings endpoint failed" in found.note
    assert sorted(c.count for c in found.clusters) == [CAKES, TRAINS]


def test_a_secret_not_bound_to_the_endpoint_is_refused(
    alice_client: Client, keyed: Project
) -> None:
    response = _put(
        alice_client,
        keyed,
        base_url="https://api.example.com/v1",
        model="m",
        api_key_secret="EMBED_KEY",
    )
    assert response.status_code == 400
    assert response.json()["field"] == "embeddings.api_key_secret"


def test_only_project_admins_set_the_endpoint(
    bob_client: Client, keyed: Project, fake_openai
) -> None:
    response = _put(bob_client, keyed, base_url=fake_openai.base_url, model="m")
    assert response.status_code == 403
    keyed.refresh_from_db()
    assert keyed.embeddings == {}


def test_an_outsider_cannot_see_the_setting(
    mallory_client: Client, project: Project
) -> None:
    response = mallory_client.get(f"{API}/projects/{project.pk}/embeddings")
    assert response.status_code == 404
