"""The evaluation pages: the list, the trend with its verdicts, the form,
Run now, schedules; and nothing of them from another project."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from django.test import Client

from runs.evaluations.selectors import evaluation_trend
from runs.evaluations.services import evaluation_run
from runs.executor.store import run_finish
from runs.models import Dataset, Evaluation, Project, Run, Schedule, Target
from tests.evaluations.conftest import make_evaluation
from tests.factories import store_outcomes

pytestmark = pytest.mark.django_db


def text_of(response: object) -> str:
    html = response.content.decode()  # type: ignore[attr-defined]  # a test response
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def ended_run(evaluation: Evaluation, user: User, *, passed: bool) -> Run:
    run = evaluation_run(evaluation=evaluation, user=user)
    outcomes = [{"scores": [("exact_match", passed, "")]}] * run.total
    store_outcomes(run, outcomes)
    run_finish(run.pk, cancelled=False)
    run.refresh_from_db()
    return run


def test_the_trend_shows_each_run_and_its_verdict_against_the_previous(
    evaluation: Evaluation, bob: User, bob_client: Client
) -> None:
    good = ended_run(evaluation, bob, passed=True)
    bad = ended_run(evaluation, bob, passed=False)
    [trend] = evaluation_trend(evaluation=evaluation)
    assert [p.run.pk for p in trend.points] == [good.pk, bad.pk]
    assert [p.pass_rate for p in trend.points] == [1.0, 0.0]
    assert [p.baseline for p in trend.points] == [None, good.pk]
    assert [p.verdict for p in trend.points] == [None, "worse"]
    low, high = trend.points[0].low, trend.points[0].high
    assert low is not None and 0.6 < low < 1.0 and high == pytest.approx(1.0)
    page = bob_client.get(f"/evaluations/{evaluation.pk}/")
    assert page.status_code == 200
    text = text_of(page)
    assert "worse" in text and f"#{bad.pk}" in text
    assert 'class="trend-marker verdict-worse"' in page.content.decode()


def test_a_floor_marks_the_runs_below_it(
    project: Project, dataset: Dataset, bob: User, bob_client: Client
) -> None:
    evaluation = make_evaluation(
        project, dataset, bob, pass_rate_floors={"exact_match": 0.5}
    )
    ended_run(evaluation, bob, passed=False)
    [trend] = evaluation_trend(evaluation=evaluation)
    assert trend.points[0].below_floor
    assert "below floor" in text_of(bob_client.get(f"/evaluations/{evaluation.pk}/"))


def test_the_project_lists_its_evaluations(
    evaluation: Evaluation, project: Project, victor_client: Client
) -> None:
    page = victor_client.get(f"/projects/{project.pk}/evaluations/")
    assert page.status_code == 200
    assert "nightly" in text_of(page)
    assert "New evaluation" not in text_of(page)  # a viewer


def test_an_editor_saves_an_evaluation_through_the_form(
    bob_client: Client, dataset: Dataset, project: Project
) -> None:
    target = Target.objects.create(
        project=project,
        name="echo",
        kind="python",
        config={"callable": "runs.targets.examples.echo"},
    )
    response = bob_client.post(
        "/evaluations/new/",
        {
            "name": "release",
            "dataset": dataset.pk,
            "dataset_policy": "latest",
            "target": target.pk,
            "scorers": ["exact_match"],
            "concurrency": "4",
            "baseline_policy": "none",
            "pass_rate_floors": '{"exact_match": 0.9}',
        },
    )
    assert response.status_code == 302, text_of(response)
    evaluation = Evaluation.objects.get(name="release")
    assert evaluation.target == target
    assert evaluation.options["concurrency"] == 4
    assert evaluation.pass_rate_floors == {"exact_match": 0.9}
    assert evaluation.dataset_policy == "latest"
    edit = bob_client.get(f"/evaluations/{evaluation.pk}/edit/")
    assert edit.status_code == 200
    assert 'value="release"' in edit.content.decode()


def test_a_bad_form_names_its_field(bob_client: Client, dataset: Dataset) -> None:
    response = bob_client.post(
        "/evaluations/new/",
        {
            "name": "release",
            "dataset": dataset.pk,
            "dataset_policy": "fixed",
            "scorers": ["exact_match"],
            "baseline_policy": "none",
        },
    )
    assert response.status_code == 200
    # The target is asked for as the required field it is on a new evaluation.
    assert response.context["form"].errors["target"] == ["This field is required."]
    assert "Target (optional)" not in text_of(response)
    assert not Evaluation.objects.filter(name="release").exists()


def test_run_now_starts_a_run_and_shows_it(
    evaluation: Evaluation, bob_client: Client
) -> None:
    response = bob_client.post(f"/evaluations/{evaluation.pk}/run/")
    run = Run.objects.get(evaluation=evaluation)
    assert response.status_code == 302
    assert response["Location"] == f"/runs/{run.pk}/"
    assert run.evaluation_trigger == "manual"
    page = bob_client.get(response["Location"]).content.decode()
    assert f'href="/evaluations/{evaluation.pk}/" id="run-evaluation"' in page


def test_a_schedule_is_added_from_the_page(
    evaluation: Evaluation, bob_client: Client
) -> None:
    response = bob_client.post(
        f"/evaluations/{evaluation.pk}/schedules/",
        {"cron": "30 2 * * *", "timezone": "Europe/Paris"},
    )
    assert response.status_code == 302
    schedule = Schedule.objects.get(evaluation=evaluation)
    page = text_of(bob_client.get(f"/evaluations/{evaluation.pk}/"))
    assert "30 2 * * *" in page and "Schedule added" in page
    bad = bob_client.post(
        f"/evaluations/{evaluation.pk}/schedules/", {"cron": "soon", "timezone": "UTC"}
    )
    assert bad.status_code == 400 and "cron expression" in text_of(bad)
    bob_client.post(f"/evaluations/{evaluation.pk}/schedules/{schedule.pk}/remove/")
    assert not Schedule.objects.exists()


def test_a_viewer_cannot_run_edit_or_schedule(
    evaluation: Evaluation, victor_client: Client
) -> None:
    assert victor_client.get(f"/evaluations/{evaluation.pk}/").status_code == 200
    for path in ("run/", "delete/", "edit/", "schedules/"):
        response = victor_client.post(
            f"/evaluations/{evaluation.pk}/{path}", {"cron": "* * * * *"}
        )
        assert response.status_code == 403, path
    assert not Run.objects.exists() and not Schedule.objects.exists()


def test_another_project_sees_and_uses_nothing(
    evaluation: Evaluation, project: Project, mallory_client: Client
) -> None:
    schedule = Schedule.objects.create(
        evaluation=evaluation, cron="* * * * *", last_tick_at=evaluation.created_at
    )
    base = f"/evaluations/{evaluation.pk}/"
    for path in ("", "edit/"):
        assert mallory_client.get(base + path).status_code == 404
    for path in ("run/", "delete/", "schedules/", f"schedules/{schedule.pk}/remove/"):
        assert mallory_client.post(base + path).status_code == 404, path
    assert mallory_client.get(f"/projects/{project.pk}/evaluations/").status_code == 404
    assert Evaluation.objects.filter(pk=evaluation.pk).exists()
    assert Schedule.objects.filter(pk=schedule.pk).exists()
    assert not Run.objects.exists()
