"""The clusters page of a run, and saving a cluster's items as a dataset."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import reverse

from runs.analysis.clusters import run_clusters
from runs.datasets import importers
from runs.models import Dataset, Item, Project, Result, Run
from runs.records import cache_keys
from tests.factories import echo_run, make_dataset, store_outcomes

pytestmark = pytest.mark.django_db

TIMEOUT = "read timed out after {s} s on https://api.example.com/v1/x?id={n}"


def _run(dataset: Dataset, outcomes: list[dict]) -> Run:
    return store_outcomes(echo_run(dataset), outcomes)


def _timeout(n: int) -> dict:
    message = TIMEOUT.format(s=n + 10, n=n)
    return {"error": ("timeout", "ReadTimeout", message), "status": "timed_out"}


@pytest.fixture
def source(project: Project) -> Dataset:
    items = [
        {
            "id": f"case-{i}",
            "input": {"question": f"What is {i} + {i}?"},
            "expected": str(2 * i) if i % 2 else None,
            "metadata": {"topic": "sums", "level": i},
        }
        for i in range(8)
    ]
    return make_dataset(project, items, name="sums")


@pytest.fixture
def run(source: Dataset) -> Run:
    outcomes = [_timeout(n) for n in (0, 1)]
    outcomes += [{"scores": [("exact_match", True, "")]}]
    outcomes += [_timeout(3)]
    outcomes += [{"scores": [("exact_match", False, f"got '{n}'")]} for n in range(4)]
    return _run(source, outcomes)


def _page(client: Client, run: Run, **query: object):
    return client.get(reverse("runs:run_clusters", args=[run.pk]), query)


def _timeout_key(run: Run) -> str:
    return run_clusters(run=run).errors[0].key


def test_the_page_shows_each_cluster_with_its_example_and_items(
    alice_client: Client, run: Run
) -> None:
    response = _page(alice_client, run)
    page = response.content.decode()
    first = Result.objects.get(run=run, item_index=0)
    assert response.status_code == 200
    assert "ReadTimeout" in page
    assert first.error_pattern in page.replace("&lt;", "<").replace("&gt;", ">")
    assert first.error_message in page
    assert reverse("runs:result_detail", args=[run.pk, first.pk]) in page
    assert f"/runs/{run.pk}/?cluster={first.error_signature}#results" in page
    assert "exact_match" in page and "4 results" in page


def test_an_editor_sees_retry_and_save(bob_client: Client, run: Run) -> None:
    page = _page(bob_client, run).content.decode()
    key = _timeout_key(run)
    assert f"/runs/{run.pk}/retry/?cluster={key}" in page
    assert reverse("runs:run_cluster_save", args=[run.pk]) in page


def test_a_viewer_sees_the_clusters_but_no_actions(
    victor_client: Client, run: Run
) -> None:
    response = _page(victor_client, run)
    page = response.content.decode()
    assert response.status_code == 200 and "ReadTimeout" in page
    assert "/retry/" not in page
    assert reverse("runs:run_cluster_save", args=[run.pk]) not in page


def test_an_outsider_gets_404(mallory_client: Client, run: Run) -> None:
    assert _page(mallory_client, run).status_code == 404


def test_the_baseline_chooser_lists_runs_of_the_same_dataset_name(
    alice_client: Client, project: Project, source: Dataset, run: Run
) -> None:
    same = _run(source, [_timeout(5)])
    elsewhere = _run(
        make_dataset(project, [{"input": "x", "expected": "x"}], name="other"), []
    )
    page = _page(alice_client, run).content.decode()
    assert f'<option value="{same.pk}"' in page
    assert f'<option value="{elsewhere.pk}"' not in page


def test_against_a_baseline_the_page_says_how_clusters_moved(
    alice_client: Client, source: Dataset, run: Run
) -> None:
    baseline = _run(source, [_timeout(5)])
    page = _page(alice_client, run, baseline=baseline.pk).content.decode()
    assert 'data-change="grown"' in page
    assert 'data-change="new"' in page


def test_a_baseline_of_another_project_is_404(
    alice_client: Client, other_project: Project, run: Run
) -> None:
    theirs = _run(make_dataset(other_project, [{"input": "x", "expected": "x"}]), [])
    assert _page(alice_client, run, baseline=theirs.pk).status_code == 404


def test_the_page_read_again_is_the_cached_one_until_what_it_shows_moves(
    monkeypatch: pytest.MonkeyPatch,
    alice_client: Client,
    victor_client: Client,
    project: Project,
    source: Dataset,
    run: Run,
) -> None:
    """The clusters page was read and rendered for every request: now once per
    state of what it shows (its run's row and scoring passes, the runs offered
    as baselines, the project's dataset names) and user."""
    # The run was never launched: a going run's key also holds the current
    # second (cache_keys.going_second), held here so that only what the page
    # shows moves it.
    monkeypatch.setattr(cache_keys, "going_second", lambda: 0)
    first = _page(alice_client, run)
    again = _page(alice_client, run)
    same = _run(source, [_timeout(5)])
    offered = _page(alice_client, run)
    make_dataset(project, [{"input": "x", "expected": "x"}], name="zebra sums")
    named = _page(alice_client, run)
    Run.objects.filter(pk=same.pk).update(name="last week's run")
    renamed_baseline = _page(alice_client, run)
    Run.objects.filter(pk=run.pk).update(name="tonight's run")
    renamed = _page(alice_client, run)
    viewer = _page(victor_client, run)

    assert first.context is not None
    assert again.context is None  # no template rendered
    token = re.compile(r"[A-Za-z0-9]{64}")  # each response's own CSRF token
    assert token.sub("", again.content.decode()) == token.sub(
        "", first.content.decode()
    )
    assert f'<option value="{same.pk}"' in offered.content.decode()
    assert '<option value="zebra sums">' in named.content.decode()
    assert "last week&#x27;s run" in renamed_baseline.content.decode()
    assert "tonight&#x27;s run" in renamed.content.decode()
    assert viewer.context is not None  # another user, another role
    assert "dataset-names" not in viewer.content.decode()


def test_the_run_page_links_to_its_clusters(alice_client: Client, run: Run) -> None:
    page = alice_client.get(reverse("runs:run_detail", args=[run.pk])).content
    assert reverse("runs:run_clusters", args=[run.pk]).encode() in page


def _save(client: Client, run: Run, key: str, name: str = "hard sums"):
    return client.post(
        reverse("runs:run_cluster_save", args=[run.pk]),
        {"cluster": key, "name": name},
    )


def test_save_as_dataset_copies_the_cluster_items(
    bob_client: Client, source: Dataset, run: Run
) -> None:
    response = _save(bob_client, run, _timeout_key(run))
    dataset = Dataset.objects.get(name="hard sums")
    assert response.status_code == 302
    assert response["Location"] == reverse("runs:dataset_detail", args=[dataset.pk])
    copied = list(
        dataset.items.order_by("index").values_list(
            "index", "external_id", "input", "expected", "metadata"
        )
    )
    originals = Item.objects.filter(dataset=source, index__in=[0, 1, 3])
    assert copied == [
        (n, item.external_id, item.input, item.expected, item.metadata)
        for n, item in enumerate(originals.order_by("index"))
    ]
    assert (dataset.version, dataset.item_count, dataset.expected_count) == (1, 3, 2)
    assert dataset.project_id == run.project_id
    assert dataset.status == Dataset.Status.READY


def test_the_saved_dataset_has_the_hash_of_an_import_of_the_same_items(
    bob_client: Client, project: Project, run: Run
) -> None:
    _save(bob_client, run, _timeout_key(run))
    saved = Dataset.objects.get(name="hard sums")
    items = [
        {"id": i.external_id, "input": i.input, "expected": i.expected, **i.metadata}
        for i in saved.items.order_by("index")
    ]
    imported = importers.dataset_create_from_items(
        project=project, user=None, name="imported", items=items
    )
    assert saved.content_hash == imported.content_hash
    assert saved.field_counts == imported.field_counts


def test_saving_under_an_existing_name_makes_a_new_version(
    bob_client: Client, source: Dataset, run: Run
) -> None:
    key = run_clusters(run=run).failed_scores[0].key
    _save(bob_client, run, key, name="sums")
    newest = Dataset.objects.filter(name="sums").order_by("-version").first()
    assert newest.version == source.version + 1
    assert newest.item_count == 4


def test_a_viewer_cannot_save_a_cluster(victor_client: Client, run: Run) -> None:
    response = _save(victor_client, run, _timeout_key(run))
    assert response.status_code == 403
    assert not Dataset.objects.filter(name="hard sums").exists()


def test_an_outsider_cannot_save_a_cluster(mallory_client: Client, run: Run) -> None:
    response = _save(mallory_client, run, _timeout_key(run))
    assert response.status_code == 404
    assert not Dataset.objects.filter(name="hard sums").exists()


def test_a_malformed_key_saves_nothing_and_says_why(
    bob_client: Client, run: Run
) -> None:
    response = _save(bob_client, run, "not-a-key")
    assert response.status_code == 302
    assert response["Location"] == reverse("runs:run_clusters", args=[run.pk])
    assert not Dataset.objects.filter(name="hard sums").exists()
    page = bob_client.get(response["Location"]).content.decode()
    assert "could not be saved" in page


def test_an_empty_cluster_saves_nothing(bob_client: Client, run: Run) -> None:
    _save(bob_client, run, "0123456789abcdef")
    assert not Dataset.objects.filter(name="hard sums").exists()
