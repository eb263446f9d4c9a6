"""The runs pages: list, new-run form, run page, result page and cancel."""

from __future__ import annotations

import json
import re
import time
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from runs.analysis.figures import run_figures_store
from runs.models import (
    Dataset,
    Item,
    Project,
    Result,
    Run,
    RunStatus,
    Score,
    Target,
)
from runs.projects.services import project_create
from runs.results.services import run_create
from runs.targets.services import target_create
from runs.testing.fake_openai import FakeOpenAIServer
from tests.factories import arithmetic_items, echo_run, make_dataset, store_outcomes
from tests.scorers.scoring import branching_chain


def _run(dataset: Dataset, **fields: object) -> Run:
    run = run_create(
        user=None,
        dataset=dataset,
        target_kind="python",
        target_config={"callable": "runs.targets.examples.echo"},
        scorers=["exact_match", "includes"],
        launch=False,
    )
    if fields:
        Run.objects.filter(pk=run.pk).update(**fields)
        run.refresh_from_db()
    return run


def _result(run: Run, index: int, **fields: object) -> Result:
    item = Item.objects.get(dataset=run.dataset, index=index)
    now = timezone.now()
    values: dict[str, object] = {
        "status": Result.Status.SUCCEEDED,
        "output": f"answer {index}",
        "attempts": [
            {
                "number": 1,
                "started_at": now.isoformat(),
                "finished_at": now.isoformat(),
                "outcome": "ok",
                "http_status": 200,
                "latency_ms": 12.5,
            }
        ],
        "latency_ms": 12.5,
        "started_at": now,
        "finished_at": now,
    }
    values.update(fields)
    return Result.objects.create(
        run=run, item=item, item_index=index, epoch=0, **values
    )


@pytest.fixture
def run(dataset: Dataset) -> Run:
    return _run(dataset)


@pytest.fixture
def demo_target(project: Project) -> Target:
    return Target.objects.create(
        project=project,
        name="Demo model",
        kind="demo",
        config={"min_latency_ms": 0, "max_latency_ms": 0, "transient_error_rate": 0},
    )


def _new_run_data(dataset: Dataset, target: Target, **changes: object) -> dict:
    data: dict[str, object] = {
        "dataset": dataset.pk,
        "target": target.pk,
        "scorers": ["exact_match", "numeric"],
        "concurrency": 4,
        "timeout_seconds": 10,
        "max_attempts": 2,
        "epochs": 1,
        "name": "from the form",
    }
    data.update(changes)
    return data


# -- runs list -------------------------------------------------------------------


def test_run_list_shows_the_members_runs(bob_client: Client, run: Run) -> None:
    response = bob_client.get(reverse("runs:run_list"))

    assert response.status_code == 200
    page = response.content.decode()
    assert reverse("runs:run_detail", args=[run.pk]) in page
    assert "arith v1" in page
    assert "0/10" in page


def _ended_run_scored(dataset: Dataset) -> Run:
    """An ended run whose calls all answered: 1 of 4 answers right."""
    run = echo_run(dataset)
    store_outcomes(
        run,
        [{"scores": [("exact_match", n == 0, f"got {n}")]} for n in range(4)],
    )
    Run.objects.filter(pk=run.pk).update(
        status=RunStatus.COMPLETED, finished_at=timezone.now()
    )
    run_figures_store(run.pk)
    run.refresh_from_db()
    return run


def test_run_list_shows_each_runs_pass_rate_beside_its_answered_calls(
    bob_client: Client, dataset: Dataset
) -> None:
    run = _ended_run_scored(dataset)

    page = bob_client.get(reverse("runs:run_list")).content.decode()

    row = page[page.index(f'aria-label="Compare run #{run.pk}"') :]
    row = row[: row.index("</tr>")]
    assert (
        '<td class="pass-rates"><span class="pass-rate"><code>exact_match</code> 25.0%'
        in row
    )
    head = re.findall(r"<th[^>]*>([^<]*)</th>", page)
    assert "Pass rate" in head and "Answered" in head and "Succeeded" not in head


def test_results_say_answered_for_the_call_and_passed_or_failed_for_the_score(
    bob_client: Client, dataset: Dataset
) -> None:
    run = _ended_run_scored(dataset)

    page = bob_client.get(reverse("runs:run_detail", args=[run.pk])).content.decode()

    results = page[page.index('id="results"') :]
    assert '<span class="badge neutral">Answered</span>' in results
    assert "Succeeded" not in results
    assert ">exact_match passed</span>" in results
    assert results.count(">exact_match failed</span>") == 3
    assert '<option value="succeeded">Answered</option>' in results


def test_run_list_escapes_what_people_named(
    bob_client: Client, project: Project
) -> None:
    dataset = make_dataset(project, arithmetic_items(2), name="<b>set</b>")
    _run(dataset, name='<script>alert("run")</script>', target_name="t&'x")

    page = bob_client.get(reverse("runs:run_list")).content.decode()

    assert "<script>alert" not in page
    assert "&lt;script&gt;alert(&quot;run&quot;)&lt;/script&gt;" in page
    assert "&lt;b&gt;set&lt;/b&gt; v1" in page
    assert "t&amp;&#x27;x" in page


def test_run_list_hides_other_projects_runs(mallory_client: Client, run: Run) -> None:
    response = mallory_client.get(reverse("runs:run_list"))

    assert response.status_code == 200
    assert reverse("runs:run_detail", args=[run.pk]) not in response.content.decode()


def test_run_list_filters_by_status(bob_client: Client, dataset: Dataset) -> None:
    done = _run(dataset, status=RunStatus.COMPLETED)
    waiting = _run(dataset)

    page = bob_client.get(reverse("runs:run_list"), {"status": "completed"})

    assert reverse("runs:run_detail", args=[done.pk]) in page.content.decode()
    assert reverse("runs:run_detail", args=[waiting.pk]) not in page.content.decode()


def test_run_list_filters_by_project(
    alice_client: Client, run: Run, project: Project, alice: User
) -> None:
    other = project_create(name="Second", owner=alice)
    other_run = _run(make_dataset(other, arithmetic_items(2)))

    page = alice_client.get(reverse("runs:run_list"), {"project": other.pk})

    assert reverse("runs:run_detail", args=[other_run.pk]) in page.content.decode()
    assert reverse("runs:run_detail", args=[run.pk]) not in page.content.decode()


def test_run_list_is_paginated_by_fifty(bob_client: Client, dataset: Dataset) -> None:
    for _ in range(51):
        _run(dataset)

    first = bob_client.get(reverse("runs:run_list"))
    second = bob_client.get(reverse("runs:run_list"), {"page": 2})

    assert first.context["page"].paginator.num_pages == 2
    assert len(first.context["page"].object_list) == 50
    assert len(second.context["page"].object_list) == 1


# -- new run -----------------------------------------------------------------------


def test_new_run_form_offers_scoped_choices_and_scorer_labels(
    bob_client: Client, dataset: Dataset, demo_target: Target, mallory: User
) -> None:
    foreign = make_dataset(
        project_create(name="Hidden", owner=mallory), arithmetic_items(1)
    )
    newer = make_dataset(dataset.project, arithmetic_items(3), version=2)

    response = bob_client.get(reverse("runs:run_new"))

    assert response.status_code == 200
    page = response.content.decode()
    assert "Exact match" in page and "Numeric (tolerance)" in page
    assert f'value="{demo_target.pk}"' in page
    assert f'<option value="{foreign.pk}"' not in page
    assert page.index(f'<option value="{newer.pk}"') < page.index(
        f'<option value="{dataset.pk}"'
    )


def test_new_run_creates_the_run_and_opens_its_page(
    bob_client: Client, dataset: Dataset, demo_target: Target
) -> None:
    response = bob_client.post(
        reverse("runs:run_new"), _new_run_data(dataset, demo_target)
    )

    run = Run.objects.get()
    assert response.status_code == 302
    assert response.url == reverse("runs:run_detail", args=[run.pk])
    assert run.name == "from the form"
    assert run.target_kind == "demo"
    assert [s["kind"] for s in run.scorers] == ["exact_match", "numeric"]
    assert run.options["concurrency"] == 4
    assert run.options["max_attempts"] == 2
    assert run.total == 10


def test_new_run_takes_limits_and_back_off_options(
    bob_client: Client, dataset: Dataset, demo_target: Target
) -> None:
    data = _new_run_data(
        dataset,
        demo_target,
        deadline_seconds=600,
        rate_limit_rpm=120,
        retry_budget=50,
        fail_fast_error_rate=0.5,
        fail_fast_min_items=30,
    )
    response = bob_client.post(reverse("runs:run_new"), data)

    assert response.status_code == 302
    options = Run.objects.get().options
    assert (options["deadline_seconds"], options["rate_limit_rpm"]) == (600, 120)
    assert (options["retry_budget"], options["fail_fast_error_rate"]) == (50, 0.5)
    assert options["fail_fast_min_items"] == 30
    assert options["adaptive_concurrency"] is False  # its box was not ticked


def test_new_run_shows_an_option_error_on_its_field(
    bob_client: Client, dataset: Dataset, demo_target: Target
) -> None:
    response = bob_client.post(
        reverse("runs:run_new"), _new_run_data(dataset, demo_target, concurrency=0)
    )

    assert response.status_code == 200
    assert not Run.objects.exists()
    errors = response.context["form"].errors
    assert "concurrency" in errors
    assert "field 'options.concurrency'" in errors["concurrency"][0]
    assert "must be between 1 and 1024" in response.content.decode()


def test_new_run_takes_scorer_parameters(
    bob_client: Client, dataset: Dataset, demo_target: Target
) -> None:
    data = _new_run_data(
        dataset,
        demo_target,
        scorers=["regex", "numeric"],
        regex__pattern=r"^\d+$",
        regex__mode="fullmatch",
        numeric__abs_tol="0.5",
        numeric__extract="first",
    )

    response = bob_client.post(reverse("runs:run_new"), data)

    assert response.status_code == 302
    params = {spec["kind"]: spec["params"] for spec in Run.objects.get().scorers}
    assert (params["regex"]["pattern"], params["regex"]["mode"]) == (
        r"^\d+$",
        "fullmatch",
    )
    assert (params["numeric"]["abs_tol"], params["numeric"]["extract"]) == (
        0.5,
        "first",
    )


def test_new_run_shows_a_scorer_parameter_error_on_its_field(
    bob_client: Client, dataset: Dataset, demo_target: Target
) -> None:
    data = _new_run_data(
        dataset, demo_target, scorers=["exact_match", "regex"], regex__pattern="("
    )

    response = bob_client.post(reverse("runs:run_new"), data)

    assert response.status_code == 200
    errors = response.context["form"].errors["regex__pattern"]
    assert "field 'scorers[1].params.pattern'" in errors[0]
    assert "not a valid regular expression" in errors[0]
    assert not Run.objects.exists()


def test_new_run_ignores_the_parameters_of_scorers_not_ticked(
    bob_client: Client, dataset: Dataset, demo_target: Target
) -> None:
    data = _new_run_data(
        dataset, demo_target, scorers=["exact_match"], numeric__abs_tol="-1"
    )

    response = bob_client.post(reverse("runs:run_new"), data)

    assert response.status_code == 302
    assert [spec["kind"] for spec in Run.objects.get().scorers] == ["exact_match"]


def test_new_run_refuses_scorers_needing_answers_a_dataset_lacks(
    bob_client: Client, project: Project, demo_target: Target
) -> None:
    bare = make_dataset(project, [{"id": "a", "input": "1+1"}], name="bare")

    response = bob_client.post(
        reverse("runs:run_new"), _new_run_data(bare, demo_target)
    )

    assert response.status_code == 200
    errors = response.context["form"].errors["scorers"]
    assert "expected answer" in errors[0] and "'bare'" in errors[0]
    assert not Run.objects.exists()


def test_new_run_page_shows_each_scorers_parameters(
    bob_client: Client, dataset: Dataset
) -> None:
    page = bob_client.get(reverse("runs:run_new")).content.decode()

    assert 'name="regex__pattern"' in page
    assert 'name="numeric__abs_tol"' in page
    assert 'name="scorer_timeout_seconds"' in page


def test_new_run_needs_a_scorer(
    bob_client: Client, dataset: Dataset, demo_target: Target
) -> None:
    response = bob_client.post(
        reverse("runs:run_new"), _new_run_data(dataset, demo_target, scorers=[])
    )

    assert response.status_code == 200
    assert "scorers" in response.context["form"].errors
    assert not Run.objects.exists()


def test_new_run_refuses_a_target_of_another_project(
    alice_client: Client, dataset: Dataset, alice: User
) -> None:
    other = project_create(name="Second", owner=alice)
    target = Target.objects.create(project=other, name="t", kind="demo", config={})

    response = alice_client.post(
        reverse("runs:run_new"), _new_run_data(dataset, target)
    )

    assert response.status_code == 200
    assert "another project" in str(response.context["form"].errors["target"])
    assert not Run.objects.exists()


def test_new_run_is_forbidden_to_a_viewer(
    victor_client: Client, dataset: Dataset, demo_target: Target
) -> None:
    response = victor_client.post(
        reverse("runs:run_new"), _new_run_data(dataset, demo_target)
    )

    assert response.status_code == 403
    assert not Run.objects.exists()


def test_new_run_does_not_find_an_outsiders_dataset(
    mallory_client: Client, dataset: Dataset, demo_target: Target
) -> None:
    response = mallory_client.post(
        reverse("runs:run_new"), _new_run_data(dataset, demo_target)
    )

    assert response.status_code == 404
    assert not Run.objects.exists()


def test_new_run_preselects_the_demo(
    bob_client: Client, dataset: Dataset, demo_target: Target
) -> None:
    response = bob_client.get(reverse("runs:run_new"), {"demo": "1"})

    form = response.context["form"]
    assert form["dataset"].value() == dataset.pk
    assert form["target"].value() == demo_target.pk
    assert (
        "Start the demo run"
        in bob_client.get(reverse("runs:run_list")).content.decode()
    )


@pytest.mark.django_db(transaction=True)
def test_new_run_executes_against_an_openai_endpoint(
    bob_client: Client, dataset: Dataset, fake_openai: FakeOpenAIServer
) -> None:
    target = target_create(
        project=dataset.project,
        user=dataset.project.memberships.get(role="admin").user,
        name="local model",
        kind="openai_chat",
        config={"base_url": fake_openai.base_url, "model": "fake"},
    )

    response = bob_client.post(
        reverse("runs:run_new"),
        _new_run_data(dataset, target, scorers=["exact_match"]),
    )

    assert response.status_code == 302
    run = Run.objects.get()
    deadline = time.monotonic() + 30
    while not run.is_final and time.monotonic() < deadline:
        time.sleep(0.05)
        run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED
    assert run.succeeded == 10
    assert fake_openai.stats.requests == 10
    page = bob_client.get(response.url).content.decode()
    assert "Completed" in page
    assert "ws-connect" not in page
    assert Score.objects.filter(result__run=run, passed=True).count() == 10


# -- run page ----------------------------------------------------------------------


def test_run_page_shows_configuration_and_live_progress(
    victor_client: Client, run: Run
) -> None:
    _result(run, 0)
    _result(
        run,
        1,
        status=Result.Status.FAILED,
        output=None,
        error_type="HTTP500",
        error_message="boom",
    )

    response = victor_client.get(reverse("runs:run_detail", args=[run.pk]))

    assert response.status_code == 200
    page = response.content.decode()
    assert f'ws-connect="/ws/runs/{run.pk}/"' in page
    assert 'id="run-progress"' in page
    assert 'id="live-rows"' in page
    assert reverse("runs:dataset_detail", args=[run.dataset_id]) in page
    assert "exact_match" in page and "includes" in page
    assert "concurrency 8" in page
    assert "HTTP500" in page
    assert reverse("runs:result_detail", args=[run.pk, run.results.first().pk]) in page
    # a viewer sees no cancel button
    assert reverse("runs:run_cancel", args=[run.pk]) not in page


def test_run_page_offers_cancel_to_an_editor(bob_client: Client, run: Run) -> None:
    page = bob_client.get(reverse("runs:run_detail", args=[run.pk])).content.decode()

    assert f'hx-post="{reverse("runs:run_cancel", args=[run.pk])}"' in page


def test_run_page_of_a_finished_run_has_no_live_block(
    bob_client: Client, dataset: Dataset
) -> None:
    run = _run(
        dataset,
        status=RunStatus.FAILED,
        error="all 10 items failed",
        finished_at=timezone.now(),
        started_at=timezone.now() - timedelta(seconds=3),
    )

    page = bob_client.get(reverse("runs:run_detail", args=[run.pk])).content.decode()

    assert "ws-connect" not in page
    assert "all 10 items failed" in page
    assert reverse("runs:run_cancel", args=[run.pk]) not in page


def test_run_page_filters_results_by_status(bob_client: Client, run: Run) -> None:
    ok = _result(run, 0)
    bad = _result(run, 1, status=Result.Status.TIMED_OUT, output=None)

    response = bob_client.get(
        reverse("runs:run_detail", args=[run.pk]), {"status": "timed_out"}
    )

    assert list(response.context["page"].object_list) == [bad]
    assert ok not in response.context["page"].object_list


def test_run_page_shows_mean_score_per_scorer(bob_client: Client, run: Run) -> None:
    for index, value in ((0, 1.0), (1, 0.0)):
        result = _result(run, index)
        Score.objects.create(result=result, scorer="exact_match", value=value)

    response = bob_client.get(reverse("runs:run_detail", args=[run.pk]))

    summary = {s.scorer: s for s in response.context["overview"].scorers}
    assert summary["exact_match"].mean == 0.5
    assert summary["includes"].mean is None
    assert "0.500" in response.content.decode()


def test_a_running_runs_page_leads_with_the_pass_rate_per_scorer(
    bob_client: Client, run: Run
) -> None:
    for index, value in ((0, 1.0), (1, 0.0), (2, 1.0)):
        result = _result(run, index)
        Score.objects.create(
            result=result, scorer="exact_match", value=value, passed=bool(value)
        )
    _result(run, 3, status=Result.Status.FAILED, output=None, error_type="Boom")

    page = bob_client.get(reverse("runs:run_detail", args=[run.pk])).content.decode()

    table = page[page.index('<table class="data compact scores">') :]
    table = table[: table.index("</table>")]
    head = re.findall(r"<th[^>]*>([^<]*)</th>", table)
    assert head[:4] == ["Scorer", "Pass rate", "Passed", "Mean score"]
    # 2 of 4 results passed (the failed call counts); the mean is over 3 scores.
    assert '<td class="num pass-rate">50.0%</td>' in table
    assert "2 / 4" in table and "0.667" in table


def test_a_large_running_runs_page_says_how_many_results_its_scorers_are_of(
    bob_client: Client, run: Run, held_second: list[int]
) -> None:
    # A large going run keeps its figures for a second per 20,000 results
    # (cache_keys.going_window): its scorers' table may be of fewer results
    # than its counts, which follow every batch.
    result = _result(run, 0)
    Score.objects.create(result=result, scorer="exact_match", value=1, passed=True)
    Run.objects.filter(pk=run.pk).update(succeeded=60_000)  # a 3-second window
    held_second[0] = 999  # its start
    url = reverse("runs:run_detail", args=[run.pk])
    first = bob_client.get(url).content.decode()
    for index in (1, 2):
        _result(run, index)
    Run.objects.filter(pk=run.pk).update(succeeded=60_002)
    held_second[0] += 1

    page = bob_client.get(url).content.decode()

    assert "Over 1 of the 60000 results stored" in first
    assert "Over 1 of the 60002 results stored" in page


def test_run_page_is_not_found_for_an_outsider(
    mallory_client: Client, run: Run
) -> None:
    response = mallory_client.get(reverse("runs:run_detail", args=[run.pk]))

    assert response.status_code == 404


# -- result page -----------------------------------------------------------------


def test_result_page_shows_output_scores_and_attempts(
    victor_client: Client, run: Run
) -> None:
    result = _result(
        run,
        3,
        status=Result.Status.FAILED,
        output={"answer": [1, 2]},
        error_kind="permanent",
        error_type="MalformedResponse",
        error_message="no choices",
        attempts=[
            {
                "number": 1,
                "started_at": timezone.now().isoformat(),
                "finished_at": timezone.now().isoformat(),
                "outcome": "error",
                "http_status": 200,
                "error_type": "MalformedResponse",
                "error_message": "no choices",
                "latency_ms": 4.0,
                "raw_body": '{"id": "chatcmpl-1"}',
            }
        ],
    )
    Score.objects.create(result=result, scorer="includes", error="ValueError: nope")

    response = victor_client.get(
        reverse("runs:result_detail", args=[run.pk, result.pk])
    )

    assert response.status_code == 200
    page = response.content.decode()
    assert "What is 3 + 6?" in page
    assert "&quot;answer&quot;: [\n    1," in page
    assert "MalformedResponse" in page and "no choices" in page
    assert "<details><summary>Raw response body</summary>" in page
    assert "{&quot;id&quot;: &quot;chatcmpl-1&quot;}" in page
    assert "ValueError: nope" in page


def test_result_page_is_not_found_for_an_outsider(
    mallory_client: Client, run: Run
) -> None:
    result = _result(run, 0)

    response = mallory_client.get(
        reverse("runs:result_detail", args=[run.pk, result.pk])
    )

    assert response.status_code == 404


def test_result_page_is_not_found_under_another_run(
    bob_client: Client, run: Run, dataset: Dataset
) -> None:
    result = _result(run, 0)
    other = _run(dataset)

    response = bob_client.get(reverse("runs:result_detail", args=[other.pk, result.pk]))

    assert response.status_code == 404


# -- cancel ------------------------------------------------------------------------


def test_cancel_ends_a_pending_run_and_returns_to_its_page(
    bob_client: Client, run: Run
) -> None:
    response = bob_client.post(reverse("runs:run_cancel", args=[run.pk]))

    assert response.status_code == 302
    assert response.url == reverse("runs:run_detail", args=[run.pk])
    run.refresh_from_db()
    assert run.status == RunStatus.CANCELLED


def test_cancel_from_htmx_returns_the_progress_block(
    bob_client: Client, run: Run
) -> None:
    response = bob_client.post(
        reverse("runs:run_cancel", args=[run.pk]), headers={"HX-Request": "true"}
    )

    assert response.status_code == 200
    page = response.content.decode()
    assert page.lstrip().startswith('<section id="run-progress"')
    assert 'data-status="cancelled"' in page
    assert '<span id="run-status" hx-swap-oob="true">' in page


def test_cancel_is_forbidden_to_a_viewer(victor_client: Client, run: Run) -> None:
    response = victor_client.post(reverse("runs:run_cancel", args=[run.pk]))

    assert response.status_code == 403
    run.refresh_from_db()
    assert run.status == RunStatus.PENDING
    assert not run.cancel_requested


def test_cancel_is_not_found_for_an_outsider(mallory_client: Client, run: Run) -> None:
    response = mallory_client.post(reverse("runs:run_cancel", args=[run.pk]))

    assert response.status_code == 404
    run.refresh_from_db()
    assert not run.cancel_requested


def test_cancel_needs_a_post(bob_client: Client, run: Run) -> None:
    response = bob_client.get(reverse("runs:run_cancel", args=[run.pk]))

    assert response.status_code == 405


def test_run_page_shows_when_the_executor_backs_off(
    bob_client: Client, run: Run
) -> None:
    Run.objects.filter(pk=run.pk).update(
        status="running", throttle_limit=2, call_latency=3.25
    )

    response = bob_client.get(reverse("runs:run_detail", args=[run.pk]))

    concurrency = run.options["concurrency"]
    assert (
        f"the target is saturated: running 2 of {concurrency} calls at once, "
        "latency 3.25 s"
    ) in response.content.decode()


def test_new_run_takes_the_json_schema_and_choice_letters(
    bob_client: Client, dataset: Dataset, demo_target: Target
) -> None:
    schema = {"type": "object", "required": ["answer"]}
    data = _new_run_data(
        dataset,
        demo_target,
        scorers=["choice", "json"],
        choice__letters="abcde",
        json__schema='{"type": "object", "required": ["answer"]}',
        json__fenced="on",
    )

    response = bob_client.post(reverse("runs:run_new"), data)

    assert response.status_code == 302
    params = {spec["kind"]: spec["params"] for spec in Run.objects.get().scorers}
    assert params["choice"]["letters"] == "ABCDE"
    assert (params["json"]["schema"], params["json"]["fenced"]) == (schema, True)


def test_new_run_shows_an_invalid_json_schema_on_its_field(
    bob_client: Client, dataset: Dataset, demo_target: Target
) -> None:
    data = _new_run_data(
        dataset, demo_target, scorers=["json"], json__schema='{"type": "strin"}'
    )

    response = bob_client.post(reverse("runs:run_new"), data)

    assert response.status_code == 200
    errors = response.context["form"].errors["json__schema"]
    assert "field 'scorers[0].params.schema'" in errors[0]
    assert "is not a valid JSON Schema" in errors[0]
    assert not Run.objects.exists()


def test_new_run_refuses_a_json_schema_whose_branches_multiply(
    bob_client: Client, dataset: Dataset, demo_target: Target
) -> None:
    data = _new_run_data(
        dataset,
        demo_target,
        scorers=["exact_match", "json"],
        json__schema=json.dumps(branching_chain(40)),
    )

    response = bob_client.post(reverse("runs:run_new"), data)

    assert response.status_code == 200
    errors = response.context["form"].errors["json__schema"]
    assert "field 'scorers[1].params.schema'" in errors[0]
    assert "over 10,000 subschema evaluations" in errors[0]
    assert not Run.objects.exists()
