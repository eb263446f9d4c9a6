"""/api/v1/runs: create and launch, list, read, cancel, page through results."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.http import HttpResponse
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from runs.analysis.result_table import run_result_table
from runs.models import (
    FINAL_RUN_STATUSES,
    Dataset,
    Project,
    Result,
    Run,
    RunStatus,
    Score,
)
from runs.projects.services import project_create
from runs.records.versions import results_changed
from runs.results.services import run_create
from runs.targets.services import target_create
from runs.testing.fake_openai import FakeOpenAIServer
from tests.factories import arithmetic_items, make_dataset
from tests.scorers.scoring import branching_chain

API = "/api/v1"
CONFIG = {"base_url": "http://127.0.0.1:9/v1", "model": "m"}
FAST = {"backoff_base_seconds": 0.01, "backoff_max_seconds": 0.05}
POLL_SECONDS = 30.0

db = pytest.mark.django_db
# The run executes on the launcher's background thread, which must see the
# rows this test writes: they have to be committed.
live_db = pytest.mark.django_db(transaction=True)


def post_run(client: Client, dataset: Dataset, **fields: Any) -> HttpResponse:
    payload = {
        "dataset": dataset.pk,
        "target_kind": "openai_chat",
        "target_config": CONFIG,
        "scorers": ["exact_match"],
    }
    return client.post(
        f"{API}/runs", {**payload, **fields}, content_type="application/json"
    )


def wait_until_final(client: Client, run_id: int) -> dict[str, Any]:
    deadline = time.monotonic() + POLL_SECONDS
    while True:
        body = client.get(f"{API}/runs/{run_id}").json()
        if body["status"] in FINAL_RUN_STATUSES:
            return body
        if time.monotonic() > deadline:
            pytest.fail(f"run {run_id} still {body['status']} after {POLL_SECONDS}s")
        time.sleep(0.1)


def with_markers(count: int, markers: dict[int, str]) -> list[dict[str, Any]]:
    items = arithmetic_items(count)
    for index, marker in markers.items():
        items[index]["input"] += marker
    return items


@pytest.fixture
def run(dataset: Dataset, alice: User) -> Run:
    """A pending run that no executor has picked up."""
    return run_create(
        user=alice,
        dataset=dataset,
        target_kind="openai_chat",
        target_config=CONFIG,
        scorers=["exact_match", {"kind": "includes", "name": "contains"}],
        launch=False,
    )


@pytest.fixture
def finished_run(run: Run) -> Run:
    """``run`` with stored results: items 0-5 succeed (odd ones wrong), 6-9 fail."""
    now = timezone.now()
    items = list(run.dataset.items.order_by("index"))
    for item in reversed(items):  # stored out of order, as an executor finishes
        ok = item.index < 6
        result = Result.objects.create(
            run=run,
            item=item,
            item_index=item.index,
            status=Result.Status.SUCCEEDED if ok else Result.Status.FAILED,
            output=item.expected if ok and item.index % 2 == 0 else "nope",
            error_kind="" if ok else "permanent",
            error_type="" if ok else "HTTPStatusError",
            error_message="" if ok else "HTTP 400",
            attempts=[{"outcome": "ok" if ok else "error"}],
            latency_ms=12.5,
            prompt_tokens=10,
            completion_tokens=1,
            started_at=now - timedelta(seconds=1),
            finished_at=now,
        )
        if ok:
            right = float(item.index % 2 == 0)
            Score.objects.create(
                result=result, scorer="exact_match", value=right, passed=bool(right)
            )
            Score.objects.create(result=result, scorer="contains", error="boom")
    Run.objects.filter(pk=run.pk).update(
        status=RunStatus.COMPLETED_WITH_ERRORS,
        succeeded=6,
        failed=4,
        started_at=now - timedelta(seconds=2),
        finished_at=now,
    )
    run.refresh_from_db()
    return run


# -- create ---------------------------------------------------------------------


@db
@pytest.mark.parametrize("persona", ["alice_client", "bob_client"])
def test_editor_creates_a_run(
    request: pytest.FixtureRequest, dataset: Dataset, persona: str
) -> None:
    response = post_run(
        request.getfixturevalue(persona),
        dataset,
        name="baseline",
        options={"concurrency": 2, "epochs": 2},
    )

    assert response.status_code == 201
    body = response.json()
    run = Run.objects.get(pk=body["id"])
    assert (body["name"], body["status"], body["dataset"]) == (
        "baseline",
        "pending",
        dataset.pk,
    )
    assert body["dataset_hash"] == dataset.content_hash
    assert (body["target_kind"], body["target"]) == ("openai_chat", None)
    assert body["options"]["concurrency"] == 2
    assert body["counts"]["total"] == body["counts"]["pending"] == 20
    assert body["scorers"] == [
        {
            "name": "exact_match",
            "kind": "exact_match",
            "params": run.scorers[0]["params"],
        }
    ]
    assert body["score_means"] == {"exact_match": None}


@db
def test_run_of_a_stored_target_freezes_its_config(
    alice_client: Client, alice: User, dataset: Dataset, project: Project
) -> None:
    target = target_create(
        project=project, user=alice, name="gpt", kind="openai_chat", config=CONFIG
    )

    response = post_run(
        alice_client, dataset, target=target.pk, target_kind=None, target_config=None
    )

    body = response.json()
    assert response.status_code == 201
    assert (body["target"], body["target_name"]) == (target.pk, "gpt")
    assert body["target_config"]["base_url"] == CONFIG["base_url"]


@db
def test_scorer_given_as_an_object(alice_client: Client, dataset: Dataset) -> None:
    scorer = {"kind": "exact_match", "name": "strict", "params": {"strip": False}}

    response = post_run(alice_client, dataset, scorers=[scorer, "includes"])

    assert response.status_code == 201
    names = [spec["name"] for spec in response.json()["scorers"]]
    assert names == ["strict", "includes"]


@db
@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"options": {"concurrency": 0}}, "options.concurrency"),
        ({"options": {"parallelism": 4}}, "options.parallelism"),
        ({"scorers": ["telepathy"]}, "scorers[0].kind"),
        ({"scorers": []}, "scorers"),
        ({"target_kind": None, "target_config": None}, "target"),
        ({"target_config": {"model": "m"}}, "target_config.base_url"),
    ],
)
def test_bad_run_is_refused_naming_the_field(
    alice_client: Client, dataset: Dataset, fields: dict[str, Any], field: str
) -> None:
    response = post_run(alice_client, dataset, **fields)

    assert response.status_code == 400
    assert response.json()["field"] == field
    assert not Run.objects.exists()


@db
def test_secret_in_an_ad_hoc_target_is_refused(
    alice_client: Client, dataset: Dataset
) -> None:
    response = post_run(
        alice_client, dataset, target_config={**CONFIG, "api_key": "sk-123"}
    )

    assert response.status_code == 400
    assert "sk-123" not in response.content.decode()
    assert not Run.objects.exists()


@db
def test_target_of_another_project_is_refused(
    alice_client: Client, alice: User, dataset: Dataset
) -> None:
    side = project_create(name="Side", owner=alice)
    target = target_create(
        project=side, user=alice, name="gpt", kind="openai_chat", config=CONFIG
    )

    response = post_run(alice_client, dataset, target=target.pk)

    assert response.status_code == 400
    assert response.json()["field"] == "target"


@db
def test_outsiders_target_is_not_found(
    alice_client: Client, mallory: User, other_project: Project, dataset: Dataset
) -> None:
    target = target_create(
        project=other_project,
        user=mallory,
        name="hers",
        kind="openai_chat",
        config=CONFIG,
    )

    response = post_run(alice_client, dataset, target=target.pk)

    assert response.status_code == 404


@db
def test_viewer_cannot_create_a_run(victor_client: Client, dataset: Dataset) -> None:
    response = post_run(victor_client, dataset)

    assert response.status_code == 403
    assert not Run.objects.exists()


@db
def test_outsider_cannot_run_the_projects_dataset(
    mallory_client: Client, dataset: Dataset
) -> None:
    response = post_run(mallory_client, dataset)

    assert response.status_code == 404
    assert not Run.objects.exists()


@db
def test_anonymous_cannot_create_a_run(client: Client, dataset: Dataset) -> None:
    assert post_run(client, dataset).status_code == 401


# -- list and read ---------------------------------------------------------------


@db
@pytest.mark.parametrize("persona", ["alice_client", "bob_client", "victor_client"])
def test_members_list_runs_newest_first(
    request: pytest.FixtureRequest, run: Run, alice: User, persona: str
) -> None:
    newer = run_create(
        user=alice,
        dataset=run.dataset,
        target_kind="openai_chat",
        target_config=CONFIG,
        scorers=["exact_match"],
        launch=False,
    )

    response = request.getfixturevalue(persona).get(f"{API}/runs")

    assert [r["id"] for r in response.json()["items"]] == [newer.pk, run.pk]


@db
def test_runs_filter_by_status_project_and_dataset(
    alice_client: Client, finished_run: Run, alice: User, project: Project
) -> None:
    other = make_dataset(project, arithmetic_items(2), name="other")
    pending = run_create(
        user=alice,
        dataset=other,
        target_kind="openai_chat",
        target_config=CONFIG,
        scorers=["exact_match"],
        launch=False,
    )

    def ids(query: str) -> list[int]:
        return [
            r["id"] for r in alice_client.get(f"{API}/runs?{query}").json()["items"]
        ]

    assert ids("status=pending") == [pending.pk]
    assert ids("status=completed_with_errors") == [finished_run.pk]
    assert ids(f"dataset={other.pk}") == [pending.pk]
    assert ids(f"project={project.pk}") == [pending.pk, finished_run.pk]


@db
def test_unknown_status_filter_is_a_validation_error(
    alice_client: Client, run: Run
) -> None:
    assert alice_client.get(f"{API}/runs?status=sleeping").status_code == 422


@db
def test_outsider_never_sees_the_projects_runs(
    mallory_client: Client, run: Run
) -> None:
    listing = mallory_client.get(f"{API}/runs")
    filtered = mallory_client.get(f"{API}/runs?project={run.project_id}")

    assert listing.json() == {"items": [], "count": 0}
    assert filtered.json() == {"items": [], "count": 0}


@db
def test_run_detail_reports_counts_tokens_times_and_score_means(
    victor_client: Client, finished_run: Run
) -> None:
    response = victor_client.get(f"{API}/runs/{finished_run.pk}")

    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "completed_with_errors"
    assert body["counts"] == {
        "total": 10,
        "succeeded": 6,
        "failed": 4,
        "timed_out": 0,
        "cancelled": 0,
        "skipped": 0,
        "pending": 0,
        "processed": 10,
    }
    assert body["wall_seconds"] == pytest.approx(2.0)
    assert body["started_at"] and body["finished_at"]
    # exact_match: 3 of 6 right; "contains" only errored, so it has no mean.
    assert body["score_means"] == {"exact_match": 0.5, "contains": None}


@db
def test_run_detail_leads_with_the_pass_rate_over_every_result(
    victor_client: Client, finished_run: Run
) -> None:
    body = victor_client.get(f"{API}/runs/{finished_run.pk}").json()
    summary = victor_client.get(f"{API}/runs/{finished_run.pk}/summary").json()

    # 3 of 10 results passed exact_match (4 target calls failed); its mean
    # is over the 6 scored ones: a different figure, named so.
    assert body["pass_rate"] == {"exact_match": 0.3, "contains": 0.0}
    assert body["pass_rate"] == {
        s["scorer"]: s["pass_rate"] for s in summary["scorers"]
    }
    assert body["score_means"]["exact_match"] == 0.5


@db
def test_outsider_gets_404_for_a_run(mallory_client: Client, run: Run) -> None:
    assert mallory_client.get(f"{API}/runs/{run.pk}").status_code == 404


@db
def test_anonymous_cannot_read_a_run(client: Client, run: Run) -> None:
    assert client.get(f"{API}/runs/{run.pk}").status_code == 401


# -- results ---------------------------------------------------------------------


@db
def test_results_come_in_dataset_order_with_their_scores(
    victor_client: Client, finished_run: Run
) -> None:
    body = victor_client.get(f"{API}/runs/{finished_run.pk}/results").json()

    assert body["count"] == 10
    assert [r["index"] for r in body["items"]] == list(range(10))
    first = body["items"][0]
    assert (first["external_id"], first["epoch"], first["status"]) == (
        "q0",
        0,
        "succeeded",
    )
    assert (first["output"], first["latency_ms"], first["attempt_count"]) == (
        "0",
        12.5,
        1,
    )
    assert (first["prompt_tokens"], first["completion_tokens"]) == (10, 1)
    no_judge = {
        "skipped": False,
        "prompt_tokens": None,
        "completion_tokens": None,
        "cost": None,
        "model": "",
    }
    assert first["scores"] == [
        {
            "scorer": "contains",
            "value": None,
            "passed": None,
            "reason": "",
            "error": "boom",
            **no_judge,
        },
        {
            "scorer": "exact_match",
            "value": 1.0,
            "passed": True,
            "reason": "",
            "error": "",
            **no_judge,
        },
    ]


@db
def test_results_carry_the_items_input_and_expected_answer(
    victor_client: Client, finished_run: Run
) -> None:
    body = victor_client.get(f"{API}/runs/{finished_run.pk}/results").json()

    items = {item.index: item for item in finished_run.dataset.items.all()}
    assert [(r["input"], r["expected"]) for r in body["items"]] == [
        (items[r["index"]].input, items[r["index"]].expected) for r in body["items"]
    ]
    assert body["items"][3]["input"] == "What is 3 + 6?"
    assert body["items"][3]["expected"] == "9"


@db
def test_a_result_of_an_item_without_an_answer_has_null_expected(
    alice_client: Client, finished_run: Run
) -> None:
    finished_run.dataset.items.filter(index=0).update(expected=None)

    body = alice_client.get(f"{API}/runs/{finished_run.pk}/results").json()

    assert body["items"][0]["expected"] is None
    assert body["items"][1]["expected"] == "3"


@db
def test_results_read_their_items_in_the_same_query(
    alice_client: Client, finished_run: Run
) -> None:
    url = f"{API}/runs/{finished_run.pk}/results"
    run_result_table(run=finished_run)  # stored as the run ended
    # Once-per-process reads (caches an earlier test may or may not have
    # filled) are not what this compares: a first request makes them.
    alice_client.get(f"{url}?page_size=1")
    with CaptureQueriesContext(connection) as two:
        alice_client.get(f"{url}?page_size=2")
    with CaptureQueriesContext(connection) as ten:
        alice_client.get(f"{url}?page_size=10")

    assert len(ten) == len(two)


@db
def test_a_page_of_results_read_again_is_the_cached_answer_until_its_run_moves(
    victor_client: Client, mallory_client: Client, finished_run: Run
) -> None:
    """The results API read and built its page of rows and scores for every
    request: now once per state of its run (its row and scoring passes, which
    its results_version is made of) and query."""
    url = f"{API}/runs/{finished_run.pk}/results?status=failed&page_size=3"
    first = victor_client.get(url).json()
    with CaptureQueriesContext(connection) as again:
        cached = victor_client.get(url).json()
    # Now: the next request empties the connection's log.
    read_again = [query["sql"] for query in again.captured_queries]
    Result.objects.filter(run=finished_run, item_index=6).update(
        error_message="HTTP 503"
    )
    results_changed(finished_run)  # as a retry or re-score does
    third = victor_client.get(url).json()
    second_page = victor_client.get(f"{url}&page=2").json()

    assert cached == first
    # Read: the session's user, the run's row and its scoring passes; no
    # result nor score.
    assert read_again
    assert not [sql for sql in read_again if '"runs_result"' in sql]
    assert not [sql for sql in read_again if '"runs_score"' in sql]
    assert [r["error_message"] for r in first["items"]] == ["HTTP 400"] * 3
    assert third["items"][0]["error_message"] == "HTTP 503"
    assert [r["index"] for r in second_page["items"]] == [9]
    # Not a member: not found, never another user's cached answer.
    assert mallory_client.get(url).status_code == 404


@db
def test_results_filter_by_status(alice_client: Client, finished_run: Run) -> None:
    url = f"{API}/runs/{finished_run.pk}/results?status=failed"

    body = alice_client.get(url).json()

    assert [r["index"] for r in body["items"]] == [6, 7, 8, 9]
    assert {r["error_message"] for r in body["items"]} == {"HTTP 400"}
    assert body["items"][0]["scores"] == []


@db
def test_results_are_paginated(alice_client: Client, finished_run: Run) -> None:
    url = f"{API}/runs/{finished_run.pk}/results?page_size=4&page=3"

    body = alice_client.get(url).json()

    assert body["count"] == 10
    assert [r["index"] for r in body["items"]] == [8, 9]


@db
def test_unknown_result_status_is_a_validation_error(
    alice_client: Client, run: Run
) -> None:
    url = f"{API}/runs/{run.pk}/results?status=meh"

    assert alice_client.get(url).status_code == 422


@db
def test_outsider_gets_404_for_results(
    mallory_client: Client, finished_run: Run
) -> None:
    url = f"{API}/runs/{finished_run.pk}/results"

    assert mallory_client.get(url).status_code == 404


# -- cancel ----------------------------------------------------------------------


@db
def test_cancel_ends_an_unclaimed_run_and_can_be_repeated(
    bob_client: Client, run: Run
) -> None:
    first = bob_client.post(f"{API}/runs/{run.pk}/cancel")
    again = bob_client.post(f"{API}/runs/{run.pk}/cancel")

    assert (first.status_code, again.status_code) == (200, 200)
    assert first.json()["status"] == again.json()["status"] == "cancelled"
    run.refresh_from_db()
    assert run.status == RunStatus.CANCELLED
    assert run.cancel_requested


@db
def test_cancel_of_a_finished_run_changes_nothing(
    alice_client: Client, finished_run: Run
) -> None:
    response = alice_client.post(f"{API}/runs/{finished_run.pk}/cancel")

    assert response.status_code == 200
    assert response.json()["status"] == "completed_with_errors"
    finished_run.refresh_from_db()
    assert not finished_run.cancel_requested


@db
def test_viewer_cannot_cancel(victor_client: Client, run: Run) -> None:
    response = victor_client.post(f"{API}/runs/{run.pk}/cancel")

    assert response.status_code == 403
    run.refresh_from_db()
    assert (run.status, run.cancel_requested) == (RunStatus.PENDING, False)


@db
def test_outsider_cannot_cancel(mallory_client: Client, run: Run) -> None:
    response = mallory_client.post(f"{API}/runs/{run.pk}/cancel")

    assert response.status_code == 404
    run.refresh_from_db()
    assert not run.cancel_requested


@db
def test_anonymous_cannot_cancel(client: Client, run: Run) -> None:
    assert client.post(f"{API}/runs/{run.pk}/cancel").status_code == 401


# -- end to end, on the launcher's background thread -----------------------------


@live_db
def test_run_end_to_end_against_a_local_server(
    alice_client: Client, project: Project, fake_openai: FakeOpenAIServer
) -> None:
    items = with_markers(6, {1: "[[status:400]]", 2: "[[wrong]]", 4: "[[status:400]]"})
    dataset = alice_client.post(
        f"{API}/datasets",
        {"project": project.pk, "name": "e2e", "items": items},
        content_type="application/json",
    ).json()
    target = alice_client.post(
        f"{API}/targets",
        {
            "project": project.pk,
            "name": "fake",
            "kind": "openai_chat",
            "config": {"base_url": fake_openai.base_url, "model": "m"},
        },
        content_type="application/json",
    ).json()

    created = alice_client.post(
        f"{API}/runs",
        {
            "dataset": dataset["id"],
            "target": target["id"],
            "scorers": ["exact_match"],
            "options": {"concurrency": 3, "max_attempts": 2, **FAST},
        },
        content_type="application/json",
    )
    assert created.status_code == 201
    run = wait_until_final(alice_client, created.json()["id"])

    assert run["status"] == "completed_with_errors"
    counts = run["counts"]
    assert (counts["total"], counts["succeeded"], counts["failed"]) == (6, 4, 2)
    assert (counts["processed"], counts["pending"], counts["skipped"]) == (6, 0, 0)
    assert run["score_means"] == {"exact_match": 0.75}
    assert run["prompt_tokens"] > 0
    results_url = f"{API}/runs/{run['id']}/results"
    every = alice_client.get(results_url).json()
    assert [r["index"] for r in every["items"]] == list(range(6))
    failed = alice_client.get(f"{results_url}?status=failed").json()
    assert [r["external_id"] for r in failed["items"]] == ["q1", "q4"]
    assert all(len(r["attempts"]) == 1 for r in failed["items"])  # not retried
    wrong = every["items"][2]
    assert (wrong["status"], wrong["scores"][0]["value"]) == ("succeeded", 0.0)


@live_db
def test_ad_hoc_target_run_completes(
    bob_client: Client, dataset: Dataset, fake_openai: FakeOpenAIServer
) -> None:
    created = post_run(
        bob_client,
        dataset,
        target_config={"base_url": fake_openai.base_url, "model": "m"},
    )

    run = wait_until_final(bob_client, created.json()["id"])

    assert run["status"] == "completed"
    assert run["counts"]["succeeded"] == 10
    assert run["score_means"] == {"exact_match": 1.0}
    assert fake_openai.stats.requests == 10


@live_db
def test_cancel_stops_a_running_run_and_keeps_what_finished(
    alice_client: Client, project: Project, fake_openai: FakeOpenAIServer
) -> None:
    dataset = make_dataset(project, with_markers(4, {2: "[[hang]]", 3: "[[hang]]"}))
    created = post_run(
        alice_client,
        dataset,
        target_config={"base_url": fake_openai.base_url, "model": "m"},
        options={"concurrency": 4},
    )
    run_id = created.json()["id"]
    deadline = time.monotonic() + POLL_SECONDS
    while Result.objects.filter(run_id=run_id).count() < 2:
        assert time.monotonic() < deadline, "the quick items never finished"
        time.sleep(0.1)

    cancelled = alice_client.post(f"{API}/runs/{run_id}/cancel")
    run = wait_until_final(alice_client, run_id)

    assert cancelled.status_code == 200
    assert run["status"] == "cancelled"
    assert run["counts"]["succeeded"] == 2
    assert run["counts"]["processed"] + run["counts"]["skipped"] == 4


def test_run_needing_expected_answers_on_a_dataset_without_them_is_refused(
    alice_client: Client, project: Project
) -> None:
    bare = make_dataset(project, [{"id": "a", "input": "1+1"}], name="bare")

    response = post_run(alice_client, bare, scorers=["includes", "exact_match"])

    assert response.status_code == 400
    body = response.json()
    assert body["field"] == "scorers"
    assert (
        "includes, exact_match compare outputs with the expected answer"
        in (body["detail"])
    )
    assert not Run.objects.exists()


def test_run_without_expected_answers_takes_scorers_that_need_none(
    alice_client: Client, project: Project
) -> None:
    bare = make_dataset(project, [{"id": "a", "input": "1+1"}], name="bare")
    regex = {"kind": "regex", "params": {"pattern": "\\d"}}

    response = post_run(alice_client, bare, scorers=[regex])

    assert response.status_code == 201


@db
def test_a_json_schema_whose_branches_multiply_is_refused_naming_the_field(
    alice_client: Client, dataset: Dataset
) -> None:
    scorer = {"kind": "json", "params": {"schema": branching_chain(40)}}

    response = post_run(alice_client, dataset, scorers=["exact_match", scorer])

    assert response.status_code == 400
    assert response.json()["field"] == "scorers[1].params.schema"
    assert "over 10,000 subschema evaluations" in response.json()["detail"]
    assert not Run.objects.exists()
