"""Titles of content clusters written by the run's judge model."""

from __future__ import annotations

import socket

import pytest

from runs.analysis.content_clusters import run_content_clusters
from runs.models import Project, Run
from tests.content_runs import topic_dataset, topic_run

pytestmark = pytest.mark.django_db


def _judged(project: Project, base_url: str) -> Run:
    run = topic_run(topic_dataset(project))
    judge = {"base_url": base_url, "model": "judge-model"}
    scorers = [*run.scorers, {"name": "judge", "kind": "llm_judge", "params": judge}]
    Run.objects.filter(pk=run.pk).update(scorers=scorers)
    run.refresh_from_db()
    return run


def test_the_judge_names_each_cluster_in_one_line(
    project: Project, fake_openai
) -> None:
    run = _judged(project, fake_openai.base_url)
    found = run_content_clusters(run=run)
    # The fake model echoes its prompt: the title is its first line.
    assert [c.title for c in found.clusters] == [
        "These failed items fall in one group."
    ] * 2
    assert found.clusters[0].name == found.clusters[0].title
    assert found.clusters[0].terms  # still named by its terms too
    assert fake_openai.stats.requests == 2
    assert found.note == ""


def test_a_judge_that_fails_leaves_the_terms_and_a_note(project: Project) -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    run = _judged(project, f"http://127.0.0.1:{port}/v1")
    found = run_content_clusters(run=run)
    assert [c.title for c in found.clusters] == ["", ""]
    assert found.clusters[0].name == " · ".join(found.clusters[0].terms)
    assert "the judge could not name the clusters" in found.note
