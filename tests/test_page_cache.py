"""Pages and API answers cached under everything they show (runs/records/pagecache.py).

A cached answer is served only while nothing it shows has changed, never to
another user, and with a CSRF token valid for the request's session.
"""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from runs.models import Membership, Project, Run, RunStatus, ScoringPass
from runs.projects.services import api_key_create
from runs.records import cache_keys
from runs.records.versions import results_changed
from runs.secrets import store
from tests.factories import arithmetic_items, echo_run, make_dataset


def _finished_run(project: Project, *, name: str = "cached run") -> Run:
    run = echo_run(make_dataset(project, arithmetic_items(3), name=f"data {name}"))
    now = timezone.now()
    Run.objects.filter(pk=run.pk).update(
        # The table says "2 hours ago" for an hour: the same page for an hour
        # (a run made seconds ago shows a text that changes every second).
        created_at=now - timedelta(hours=2, minutes=30),
        status=RunStatus.COMPLETED,
        name=name,
        started_at=now,
        finished_at=now,
        succeeded=2,
        failed=1,
    )
    return Run.objects.get(pk=run.pk)


def _csrf_token(html: str) -> str:
    match = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', html)
    assert match, "no CSRF token in the page"
    return match.group(1)


# -- the runs page -----------------------------------------------------------------


@pytest.mark.django_db
def test_runs_page_is_rendered_once_then_served_until_a_run_moves(
    alice_client: Client, project: Project
) -> None:
    run = _finished_run(project)
    first = alice_client.get("/")
    second = alice_client.get("/")

    Run.objects.filter(pk=run.pk).update(succeeded=3, name="renamed")
    third = alice_client.get("/")

    assert first.templates and not second.templates  # the second: from the cache
    assert second.content.decode().count(">cached run</a>") == 1
    assert third.templates
    assert "renamed" in third.content.decode()
    assert '<td class="num">3</td>' in third.content.decode()


@pytest.mark.django_db
def test_runs_page_with_a_going_run_is_rendered_once_a_second_not_once_a_batch(
    alice_client: Client, project: Project, held_second: list[int]
) -> None:
    # Every worker of a going run stores batches several times a second: a
    # table keyed by its counts was rendered again for each (8.7 times a
    # second under the mixed load with two workers).
    run = _finished_run(project)
    Run.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING, succeeded=1)
    first = alice_client.get("/")

    Run.objects.filter(pk=run.pk).update(succeeded=2)  # a batch, same second
    same_second = alice_client.get("/")
    held_second[0] += 1
    next_second = alice_client.get("/")
    Run.objects.filter(pk=run.pk).update(status=RunStatus.COMPLETED, succeeded=3)
    finished = alice_client.get("/")

    assert first.templates and not same_second.templates
    assert next_second.templates
    assert '<td class="num">2</td>' in next_second.content.decode()
    # Its end shows at once, whatever the second.
    assert finished.templates
    assert '<td class="num">3</td>' in finished.content.decode()


@pytest.mark.django_db
def test_runs_page_is_rendered_again_under_a_new_cache_generation(
    alice_client: Client, project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    _finished_run(project)
    first = alice_client.get("/")
    second = alice_client.get("/")

    monkeypatch.setattr(cache_keys, "generation", lambda: "next-deploy")
    third = alice_client.get("/")

    assert first.templates and not second.templates
    assert third.templates


@pytest.mark.django_db
def test_run_page_is_rendered_again_once_a_result_is_deleted_through_the_service(
    alice_client: Client, project: Project
) -> None:
    run = _finished_run(project)
    alice_client.get(f"/runs/{run.pk}/")
    assert not alice_client.get(f"/runs/{run.pk}/").templates

    results_changed(run)

    assert alice_client.get(f"/runs/{run.pk}/").templates


@pytest.mark.django_db
def test_runs_page_of_one_user_is_never_served_to_another(
    alice_client: Client, bob_client: Client, mallory_client: Client, project: Project
) -> None:
    _finished_run(project)
    alice_client.get("/")

    bob_page = bob_client.get("/").content.decode()
    mallory_page = mallory_client.get("/").content.decode()

    assert "bob" in bob_page and "alice" not in bob_page
    assert "cached run" not in mallory_page


@pytest.mark.django_db
def test_cached_runs_page_carries_a_csrf_token_valid_for_its_session(
    alice: User, project: Project
) -> None:
    _finished_run(project)
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    client.get("/")
    cached = client.get("/")
    token = _csrf_token(cached.content.decode())

    refused = client.post("/logout/", {})
    logged_out = client.post("/logout/", {"csrfmiddlewaretoken": token})

    assert not cached.templates
    assert refused.status_code == 403
    assert logged_out.status_code == 302
    assert client.get("/").status_code == 302


# What the placeholder for the CSRF token was, fixed, before it was made random.
FORMER_PLACEHOLDER = "evalsiteCsrfPlaceholder0a1f5c9e2b7d"


@pytest.mark.django_db
@pytest.mark.parametrize("page", ["runs", "run"])
def test_a_run_named_like_the_token_placeholder_shows_its_name(
    page: str, alice_client: Client, bob_client: Client, project: Project
) -> None:
    run = _finished_run(project, name=FORMER_PLACEHOLDER)
    url = "/" if page == "runs" else f"/runs/{run.pk}/"

    for client in (alice_client, bob_client, alice_client):  # the last: cached
        html = client.get(url).content.decode()

        assert f">{FORMER_PLACEHOLDER}<" in html or f"{FORMER_PLACEHOLDER} <" in html
        assert f">{_csrf_token(html)}<" not in html


@pytest.mark.django_db
def test_page_with_a_message_is_rendered_and_shows_it(
    alice: User, alice_client: Client, project: Project
) -> None:
    _finished_run(project)
    alice_client.get("/")
    alice_client.get("/")
    store.secret_set(
        project=project, user=alice, name="OLD_KEY", value="x", hosts=["x.example"]
    )
    # Leaves "Secret OLD_KEY deleted." for the next page.
    alice_client.post(f"/projects/{project.pk}/secrets/OLD_KEY/delete/")

    response = alice_client.get("/")

    assert response.templates
    assert "Secret OLD_KEY deleted." in response.content.decode()
    assert "Secret OLD_KEY deleted." not in alice_client.get("/").content.decode()


@pytest.mark.django_db
def test_runs_page_ends_with_the_session_of_a_deactivated_user(
    alice: User, alice_client: Client, project: Project
) -> None:
    _finished_run(project)
    assert alice_client.get("/").status_code == 200
    assert alice_client.get("/").status_code == 200

    User.objects.filter(pk=alice.pk).update(is_active=False)

    assert alice_client.get("/").status_code == 302


# -- a run's page ------------------------------------------------------------------


@pytest.mark.django_db
def test_finished_run_page_is_served_from_the_cache_until_it_moves(
    alice_client: Client, project: Project
) -> None:
    run = _finished_run(project)
    url = f"/runs/{run.pk}/"
    first = alice_client.get(url)
    second = alice_client.get(url)

    Run.objects.filter(pk=run.pk).update(name="renamed run")
    third = alice_client.get(url)

    assert first.status_code == second.status_code == third.status_code == 200
    assert first.templates and not second.templates
    assert second.content == first.content or _same_but_token(first, second)
    assert "renamed run" in third.content.decode()


def _same_but_token(first: object, second: object) -> bool:
    def strip(response: object) -> str:
        html = response.content.decode()  # type: ignore[attr-defined]
        return re.sub(r"[A-Za-z0-9]{64}", "TOKEN", html)

    return strip(first) == strip(second)


@pytest.mark.django_db
def test_cached_run_page_reads_the_run_and_its_passes_in_one_statement(
    alice_client: Client, project: Project
) -> None:
    # Every cached page of a run (its page, results, live figures, clusters)
    # read the run's row, then its scoring passes: two statements, besides
    # the signed-in user's, where one join gives both.
    run = _finished_run(project)
    for _ in range(2):
        ScoringPass.objects.create(run=run, status=ScoringPass.Status.COMPLETED)
    url = f"/runs/{run.pk}/"
    alice_client.get(url)

    with CaptureQueriesContext(connection) as queries:
        cached = alice_client.get(url)

    assert cached.status_code == 200 and not cached.templates
    tables = [
        "runs_run" in q["sql"] or "runs_scoringpass" in q["sql"]
        for q in queries.captured_queries
    ]
    assert tables.count(True) == 1, [q["sql"] for q in queries.captured_queries]


@pytest.mark.django_db
def test_run_page_is_rendered_again_when_a_scoring_pass_ends(
    alice_client: Client, project: Project
) -> None:
    run = _finished_run(project)
    ScoringPass.objects.create(run=run, status=ScoringPass.Status.COMPLETED)
    url = f"/runs/{run.pk}/"
    alice_client.get(url)
    assert not alice_client.get(url).templates

    ScoringPass.objects.create(run=run, status=ScoringPass.Status.FAILED)

    assert alice_client.get(url).templates


@pytest.mark.django_db
def test_run_page_follows_the_users_role(
    bob: User, bob_client: Client, project: Project
) -> None:
    run = _finished_run(project)
    url = f"/runs/{run.pk}/"
    assert "run-retry-link" in bob_client.get(url).content.decode()

    Membership.objects.filter(user=bob, project=project).update(role="viewer")

    assert "run-retry-link" not in bob_client.get(url).content.decode()


@pytest.mark.django_db
def test_run_page_is_built_afresh_while_a_rescore_goes(
    alice_client: Client, project: Project
) -> None:
    run = _finished_run(project)
    ScoringPass.objects.create(run=run, status=ScoringPass.Status.RUNNING)
    url = f"/runs/{run.pk}/"

    alice_client.get(url)

    assert alice_client.get(url).templates


@pytest.mark.django_db
def test_run_page_of_another_project_stays_404_after_a_members_view(
    alice_client: Client, mallory_client: Client, project: Project
) -> None:
    run = _finished_run(project)
    alice_client.get(f"/runs/{run.pk}/")

    assert mallory_client.get(f"/runs/{run.pk}/").status_code == 404


@pytest.mark.django_db
def test_run_page_with_a_bad_filter_stays_a_400_from_the_cache(
    alice_client: Client, project: Project
) -> None:
    run = _finished_run(project)
    url = f"/runs/{run.pk}/?verdict=bogus"

    assert alice_client.get(url).status_code == 400
    assert alice_client.get(url).status_code == 400


# -- the API's run list ------------------------------------------------------------


@pytest.mark.django_db
def test_api_run_list_is_answered_from_the_cache_until_a_run_moves(
    alice: User, project: Project
) -> None:
    run = _finished_run(project)
    _key, plain = api_key_create(user=alice, name="k")
    client = Client(headers={"Authorization": f"Bearer {plain}"})
    first = client.get("/api/v1/runs")
    second = client.get("/api/v1/runs")

    Run.objects.filter(pk=run.pk).update(cancel_requested=True, error="stopped")
    third = client.get("/api/v1/runs").json()

    assert first.status_code == second.status_code == 200
    assert first.content == second.content
    assert first["Content-Type"] == second["Content-Type"]
    assert first.json()["count"] == 1
    assert (third["items"][0]["cancel_requested"], third["items"][0]["error"]) == (
        True,
        "stopped",
    )


@pytest.mark.django_db
def test_api_run_list_pages_and_filters_as_before(
    alice: User, mallory: User, project: Project, other_project: Project
) -> None:
    runs = [_finished_run(project, name=f"r{n}") for n in range(3)]
    _finished_run(other_project, name="elsewhere")
    _key, plain = api_key_create(user=alice, name="k")
    client = Client(headers={"Authorization": f"Bearer {plain}"})

    page = client.get("/api/v1/runs?page=2&page_size=2").json()
    other = client.get(f"/api/v1/runs?project={other_project.pk}").json()
    bad = client.get("/api/v1/runs?page_size=100000")

    assert page["count"] == 3
    assert [item["id"] for item in page["items"]] == [runs[0].pk]
    assert other == {"items": [], "count": 0}
    assert bad.status_code == 422


@pytest.mark.django_db
def test_api_run_list_of_a_revoked_key_is_refused_at_once(
    alice: User, project: Project
) -> None:
    _finished_run(project)
    key, plain = api_key_create(user=alice, name="k")
    client = Client(headers={"Authorization": f"Bearer {plain}"})
    assert client.get("/api/v1/runs").status_code == 200

    key.revoked_at = timezone.now()
    key.save()

    assert client.get("/api/v1/runs").status_code == 401


@pytest.mark.django_db
def test_a_password_change_ends_other_sessions_at_once(
    alice: User, alice_client: Client, project: Project
) -> None:
    _finished_run(project)
    assert alice_client.get("/").status_code == 200
    assert alice_client.get("/").status_code == 200

    alice.set_password("a-new-password-entirely")
    alice.save()

    assert alice_client.get("/").status_code == 302
    assert alice_client.get(f"/runs/{Run.objects.get().pk}/").status_code == 302


@pytest.mark.django_db
def test_signed_in_user_is_read_as_the_orm_reads_it(alice: User) -> None:
    from runs.projects.auth_backend import UserBackend
    from runs.records import reads

    read = UserBackend().get_user(alice.pk)
    fresh = User.objects.get(pk=alice.pk)

    assert read is not None
    assert read.get_session_auth_hash() == fresh.get_session_auth_hash()
    assert (read.username, read.is_active, read.last_login) == (
        fresh.username,
        fresh.is_active,
        fresh.last_login,
    )
    assert reads.user_by_id(alice.pk + 1000) is None
    User.objects.filter(pk=alice.pk).update(is_active=False)
    assert UserBackend().get_user(alice.pk) is None
