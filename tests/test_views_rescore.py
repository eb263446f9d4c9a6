"""The re-score page and the run page's scoring passes."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from runs.models import Run, Score, ScoringPass
from tests.executor.conftest import wait_for
from tests.mixed_results import ended_run_with_two_failures, mixed_run


def rescore_url(run: Run) -> str:
    return reverse("runs:run_rescore", args=[run.pk])


def run_page(client, run: Run) -> str:
    response = client.get(reverse("runs:run_detail", args=[run.pk]))
    assert response.status_code == 200
    return " ".join(response.content.decode().split())


def text(response) -> str:
    return " ".join(response.content.decode().split())


@pytest.mark.django_db
def test_the_form_is_built_from_the_declarations_and_the_run(alice_client, dataset):
    run = mixed_run(dataset, ended=True)
    page = alice_client.get(rescore_url(run))
    assert page.status_code == 200
    body = text(page)
    # A checkbox per scorer kind, a field per declared parameter, a name each.
    for kind in ("exact_match", "includes", "numeric", "regex"):
        assert f'value="{kind}"' in body
        assert f'name="as__{kind}"' in body
    assert 'name="regex__pattern"' in body
    assert 'name="numeric__abs_tol"' in body
    # The run's own scorer is there under its name, ready to be changed.
    assert 'name="as__exact_match" value="exact_match"' in body
    assert "score the <strong>4 results</strong>" in body


@pytest.mark.django_db(transaction=True)
def test_posting_the_form_rescores_and_the_run_page_logs_the_pass(
    bob_client, project, fake_openai
):
    run = ended_run_with_two_failures(project, fake_openai)
    requests = fake_openai.stats.requests

    response = bob_client.post(
        rescore_url(run),
        {
            "scorers": ["regex"],
            "as__regex": "digits",
            "regex__pattern": "^[0-9]+$",
            "regex__mode": "fullmatch",
        },
    )

    assert response.status_code == 302, text(response)
    assert response.url == reverse("runs:run_detail", args=[run.pk])
    wait_for(
        lambda: ScoringPass.objects.filter(run=run, status="completed").count() == 2
    )
    assert fake_openai.stats.requests == requests
    assert Score.objects.filter(result__run=run, scorer="digits").count() == 3
    page = run_page(bob_client, run)
    assert "Scoring passes" in page
    assert "re-score 1" in page and "bob" in page
    assert '<code>digits</code> <span class="muted">regex</span>' in page
    assert "3 of 3" in page
    assert 'id="run-rescore-link"' in page


@pytest.mark.django_db
def test_a_running_pass_is_shown_and_polled_without_the_button(bob_client, dataset):
    run = mixed_run(dataset, ended=True)
    ScoringPass.objects.create(
        run=run,
        status="running",
        heartbeat_at=timezone.now(),
        scorers=[{"name": "numeric", "kind": "numeric", "params": {}}],
        total=4,
        scored=1,
    )
    page = run_page(bob_client, run)
    assert "running" in page and "1 of 4" in page
    assert 'hx-trigger="every 2s"' in page
    assert 'id="run-rescore-link"' not in page
    fragment = bob_client.get(
        reverse("runs:run_scoring_passes", args=[run.pk]), HTTP_HX_REQUEST="true"
    )
    assert fragment.status_code == 200 and "HX-Refresh" not in fragment.headers


@pytest.mark.django_db
def test_the_fragment_reloads_the_page_once_the_pass_has_ended(bob_client, dataset):
    run = mixed_run(dataset, ended=True)
    ScoringPass.objects.create(run=run, status="completed", total=4, scored=4)
    fragment = bob_client.get(
        reverse("runs:run_scoring_passes", args=[run.pk]), HTTP_HX_REQUEST="true"
    )
    assert fragment.headers["HX-Refresh"] == "true"


@pytest.mark.django_db
def test_an_interrupted_pass_is_shown_so_and_can_run_again(bob_client, dataset):
    run = mixed_run(dataset, ended=True)
    long_ago = timezone.now() - timedelta(minutes=10)
    stale = ScoringPass.objects.create(
        run=run,
        status="running",
        heartbeat_at=long_ago,
        created_at=long_ago,
        scorers=[{"name": "numeric", "kind": "numeric", "params": {}}],
        total=4,
        scored=2,
    )
    page = run_page(bob_client, run)
    assert "interrupted" in page and "Run again" in page

    response = bob_client.post(rescore_url(run), {"again": str(stale.pk)})

    assert response.status_code == 302
    stale.refresh_from_db()
    assert stale.status == "interrupted"
    again = ScoringPass.objects.filter(run=run).exclude(pk=stale.pk).last()
    assert again.scorer_names == ["numeric"]
    assert Run.objects.get(pk=run.pk).scorer_names == ["exact_match", "numeric"]


@pytest.mark.django_db
def test_bad_params_are_shown_on_their_field_and_nothing_is_written(
    alice_client, dataset
):
    run = mixed_run(dataset, ended=True)
    response = alice_client.post(
        rescore_url(run), {"scorers": ["regex"], "regex__pattern": "("}
    )
    assert response.status_code == 400
    body = text(response)
    assert "scorers[0].params.pattern" in body
    assert 'id="id_regex__pattern"' in body
    assert not ScoringPass.objects.exists()
    assert Run.objects.get(pk=run.pk).scorer_names == ["exact_match"]


@pytest.mark.django_db
def test_no_scorer_chosen_is_refused(alice_client, dataset):
    run = mixed_run(dataset, ended=True)
    response = alice_client.post(rescore_url(run), {})
    assert response.status_code == 400
    assert not ScoringPass.objects.exists()


@pytest.mark.django_db
def test_a_run_still_executing_says_why(alice_client, dataset):
    run = mixed_run(dataset)
    response = alice_client.post(rescore_url(run), {"scorers": ["numeric"]})
    assert response.status_code == 409
    assert "re-score it once it has ended" in text(response)
    assert 'id="run-rescore-link"' not in run_page(alice_client, run)


@pytest.mark.django_db
def test_the_run_page_shows_the_run_as_its_first_pass(victor_client, dataset):
    run = mixed_run(dataset, ended=True)
    page = run_page(victor_client, run)
    assert "the run" in page and "<code>exact_match</code>" in page
    # A viewer sees the passes but is not offered a re-score.
    assert 'id="run-rescore-link"' not in page


@pytest.mark.django_db
def test_an_outsider_gets_404_and_a_viewer_403(mallory_client, victor_client, dataset):
    run = mixed_run(dataset, ended=True)
    fragment = reverse("runs:run_scoring_passes", args=[run.pk])
    assert mallory_client.get(rescore_url(run)).status_code == 404
    assert (
        mallory_client.post(rescore_url(run), {"scorers": ["numeric"]}).status_code
        == 404
    )
    assert mallory_client.get(fragment).status_code == 404
    assert victor_client.get(rescore_url(run)).status_code == 403
    assert (
        victor_client.post(rescore_url(run), {"scorers": ["numeric"]}).status_code
        == 403
    )
    assert not ScoringPass.objects.exists()


@pytest.mark.django_db
def test_the_admin_lists_passes_and_adds_none(dataset):
    from django.contrib.auth.models import User
    from django.test import Client

    run = mixed_run(dataset, ended=True)
    ScoringPass.objects.create(run=run, status="completed", total=4, scored=4)
    client = Client()
    client.force_login(User.objects.create_superuser("root", "root@example.org", "pw"))
    assert client.get("/admin/runs/scoringpass/", {"q": "x"}).status_code == 200
    assert client.get("/admin/runs/scoringpass/add/").status_code == 403


@pytest.mark.django_db
def test_a_running_run_is_not_polled_as_a_pass_nor_reloaded(alice_client, dataset):
    # The run's own execution is its first pass; the live run page follows
    # it, and must never be told to reload when the run ends.
    run = mixed_run(dataset)
    page = run_page(alice_client, run)
    scoring = page[page.index('id="scoring-passes"') :][:400]
    assert "hx-trigger" not in scoring


@pytest.mark.django_db
def test_the_form_ticks_the_runs_own_scorers(alice_client, dataset):
    run = mixed_run(dataset, ended=True)
    page = alice_client.get(rescore_url(run)).content.decode()

    ticked = re.findall(
        r'<input type="checkbox" name="scorers" value="(\w+)"[^>]*checked', page
    )
    assert ticked == [spec["kind"] for spec in run.scorers] == ["exact_match"]
