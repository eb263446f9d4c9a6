"""What makes a request slow, counted: thread switches and database queries.

Timings belong in bench/http_bench.py; these tests count instead. A request
served through the ASGI application may switch to a worker thread once
(evalsite/handlers.py); pages read the database a fixed number of times,
however many rows they show.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pytest
from asgiref.sync import AsyncToSync, SyncToAsync
from channels.testing import HttpCommunicator
from django.contrib.auth.models import User
from django.core.exceptions import ImproperlyConfigured
from django.db import connections
from django.db.backends.signals import connection_created
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from runs.executor.store import ResultRecord, ScoreRecord, results_write
from runs.models import Dataset, Item, Project, Run, RunStatus
from runs.projects.services import api_key_create
from runs.records import cache_keys
from runs.results.selectors import run_overview
from runs.results.services import run_create
from tests.factories import arithmetic_items, make_dataset

PAGES = ["login", "run_list", "run_detail", "api_run_list"]


def _finished_run(project: Project, results: int, *, name: str = "") -> Run:
    """A completed run whose ``results`` items each have two scores."""
    dataset = make_dataset(project, arithmetic_items(results), name=name or "arith")
    run = _run(dataset)
    _store_results(run, Item.objects.filter(dataset=dataset))
    now = timezone.now()
    Run.objects.filter(pk=run.pk).update(
        status=RunStatus.COMPLETED, started_at=now, finished_at=now
    )
    run.refresh_from_db()
    return run


def _run(dataset: Dataset) -> Run:
    return run_create(
        user=None,
        dataset=dataset,
        target_kind="python",
        target_config={"callable": "runs.targets.examples.echo"},
        scorers=["exact_match", "includes"],
        launch=False,
    )


def _store_results(run: Run, items: Iterable[Item]) -> None:
    """Store results the way the executor does (store.results_write)."""
    now = timezone.now()
    records = [
        ResultRecord(
            item_id=item.pk,
            item_index=item.index,
            epoch=0,
            status="succeeded",
            output=str(item.expected),
            attempts=[{"number": 1, "outcome": "ok", "latency_ms": 3.0}],
            started_at=now,
            finished_at=now,
            latency_ms=3.0,
            scores=[
                ScoreRecord(scorer="exact_match", value=1.0, passed=True),
                ScoreRecord(scorer="includes", value=1.0, passed=True),
            ],
        )
        for item in items
    ]
    results_write(run.pk, records)


# -- thread switches ---------------------------------------------------------------


@pytest.fixture
def thread_switches(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every switch between the event loop and a thread, as asgiref makes them."""
    switches: list[str] = []
    to_thread = SyncToAsync.__call__
    to_loop = AsyncToSync.__call__

    async def counted_to_thread(self: SyncToAsync, *args: Any, **kwargs: Any) -> Any:
        switches.append(f"sync_to_async({getattr(self.func, '__qualname__', '?')})")
        return await to_thread(self, *args, **kwargs)

    def counted_to_loop(self: AsyncToSync, *args: Any, **kwargs: Any) -> Any:
        name = getattr(self.awaitable, "__qualname__", "?")
        switches.append(f"async_to_sync({name})")
        return to_loop(self, *args, **kwargs)

    monkeypatch.setattr(SyncToAsync, "__call__", counted_to_thread)
    monkeypatch.setattr(AsyncToSync, "__call__", counted_to_loop)
    return switches


@pytest.fixture
def application(settings: Any) -> Iterator[Callable[..., Any]]:
    """The HTTP application exactly as evalsite/asgi.py builds it (one thread)."""
    from evalsite import asgi

    settings.EVALSITE_HTTP_THREADS = 1
    app = asgi.get_asgi_application()
    yield app
    executor = getattr(app, "executor", None)
    if executor is not None:  # PostgreSQL drops no database with a session open
        executor.submit(connections.close_all).result()
        executor.shutdown()


def _paths_and_headers(alice: User, project: Project) -> dict[str, tuple[str, list]]:
    run = _finished_run(project, 60)
    client = Client()
    client.force_login(alice)
    cookie = [(b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode())]
    _key, plain = api_key_create(user=alice, name="shape")
    bearer = [(b"authorization", f"Bearer {plain}".encode())]
    return {
        "login": (reverse("login"), []),
        "run_list": (reverse("runs:run_list"), cookie),
        "run_detail": (reverse("runs:run_detail", args=[run.pk]), cookie),
        "api_run_list": ("/api/v1/runs", bearer),
    }


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("page", PAGES)
async def test_a_request_switches_to_a_thread_at_most_once(
    page: str,
    alice: User,
    project: Project,
    application: Callable[..., Any],
    thread_switches: list[str],
) -> None:
    from asgiref.sync import sync_to_async

    paths = await sync_to_async(_paths_and_headers)(alice, project)
    path, headers = paths[page]
    thread_switches.clear()
    communicator = HttpCommunicator(
        application, "GET", path, headers=[(b"host", b"testserver"), *headers]
    )
    response = await communicator.get_response(timeout=30)

    assert response["status"] == 200, response["body"][:300]
    assert len(thread_switches) <= 1, thread_switches


@pytest.mark.django_db(transaction=True)
async def test_requests_reuse_the_database_connection_of_their_thread(
    alice: User, project: Project, application: Callable[..., Any]
) -> None:
    from asgiref.sync import sync_to_async

    paths = await sync_to_async(_paths_and_headers)(alice, project)
    path, headers = paths["run_list"]
    opened: list[object] = []

    def count(sender: object, connection: object, **kwargs: Any) -> None:
        opened.append(connection)

    connection_created.connect(count)
    try:
        for _ in range(3):
            communicator = HttpCommunicator(
                application, "GET", path, headers=[(b"host", b"testserver"), *headers]
            )
            response = await communicator.get_response(timeout=30)
            assert response["status"] == 200
    finally:
        connection_created.disconnect(count)

    assert len(opened) <= 1


def test_async_only_middleware_is_refused_at_start(settings: Any) -> None:
    from evalsite.handlers import SyncChainASGIHandler

    settings.MIDDLEWARE = [
        *settings.MIDDLEWARE,
        "tests.test_http_performance_shape.AsyncOnlyMiddleware",
    ]
    with pytest.raises(ImproperlyConfigured, match="AsyncOnlyMiddleware"):
        SyncChainASGIHandler(threads=1)


class AsyncOnlyMiddleware:
    sync_capable = False
    async_capable = True

    def __init__(self, get_response: Callable[..., Any]) -> None:
        self.get_response = get_response

    async def __call__(self, request: Any) -> Any:
        return await self.get_response(request)


# -- database queries --------------------------------------------------------------


def _queries(client: Client, url: str) -> int:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as captured:
        response = client.get(url)
    assert response.status_code == 200
    return len(captured.captured_queries)


@pytest.mark.django_db
def test_run_page_reads_as_often_with_few_or_many_results(
    alice_client: Client, project: Project
) -> None:
    small = _finished_run(project, 3, name="small")
    large = _finished_run(project, 50, name="large")

    assert _queries(alice_client, f"/runs/{small.pk}/") == _queries(
        alice_client, f"/runs/{large.pk}/"
    )


@pytest.mark.django_db
def test_finished_run_page_does_not_read_live_rows_or_the_creator_apart(
    alice_client: Client, project: Project, django_assert_max_num_queries: Any
) -> None:
    run = _finished_run(project, 20)
    Run.objects.filter(pk=run.pk).update(created_by=project.memberships.first().user)

    # Session, user, run with its project, dataset, creator and the user's
    # role; its stored figures, absent here (the run was not ended by an
    # executor), so the summary (totals, scores per scorer, three latency
    # percentiles; no steps per result, the run having none) and its charts
    # (score bins, latency bins, timeline), then stored (update, or insert in
    # a savepoint); the scoring passes; count, results with their items,
    # scores. Around them, the page cache's key (the run with its joins, its
    # scoring passes) read before and after. Its result table, absent too, is
    # computed (the table read, the results with their scores' marks) and
    # stored (update, or insert in a savepoint): six more.
    with django_assert_max_num_queries(30):
        response = alice_client.get(f"/runs/{run.pk}/")

    assert response.status_code == 200
    assert "Latest results" not in response.content.decode()


@pytest.mark.django_db
def test_run_list_reads_as_often_with_few_or_many_runs(
    alice_client: Client, project: Project
) -> None:
    _finished_run(project, 2, name="first")
    few = _queries(alice_client, "/")
    for n in range(8):
        _finished_run(project, 2, name=f"more-{n}")

    assert _queries(alice_client, "/") == few


def _results_table(client: Client, run: Run) -> str:
    response = client.get(f"/runs/{run.pk}/")
    assert response.status_code == 200
    return response.content.decode().split('id="results"', 1)[1]


@pytest.mark.django_db
def test_finished_run_page_renders_its_results_table_once(
    alice_client: Client, project: Project
) -> None:
    run = _finished_run(project, 20)
    first = _results_table(alice_client, run)

    queries = _queries(alice_client, f"/runs/{run.pk}/")

    assert _results_table(alice_client, run) == first
    assert first.count("data-result-id=") == 20
    # Without the count, the results, their scores and the run's figures
    # (cached under the same key): user, run with the user's role, and its
    # scoring passes.
    assert queries <= 3


@pytest.mark.django_db
def test_run_page_shows_results_stored_since_the_last_view_the_next_second(
    alice_client: Client, project: Project, held_second: list[int]
) -> None:
    # A going run's page is keyed by the second (cache_keys.going_second).
    dataset = make_dataset(project, arithmetic_items(3))
    run = _run(dataset)
    Run.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING)
    items = list(Item.objects.filter(dataset=dataset).order_by("index"))
    _store_results(run, items[:1])
    before = _results_table(alice_client, run)

    _store_results(run, items[1:])
    held_second[0] += 1

    assert before.count("data-result-id=") == 1
    assert _results_table(alice_client, run).count("data-result-id=") == 3


@pytest.mark.django_db
def test_scorer_figures_follow_every_stored_score(
    alice: User, project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Within one second too: the live progress block shows them beside the
    # run's processed count, and "scored" must add up to it.
    monkeypatch.setattr(cache_keys, "going_second", lambda: 0)
    dataset = make_dataset(project, arithmetic_items(3))
    run = _run(dataset)
    Run.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING)
    items = list(Item.objects.filter(dataset=dataset).order_by("index"))
    _store_results(run, items[:1])
    before = run_overview(user=alice, run_id=run.pk).scorers

    _store_results(run, items[1:])
    after = run_overview(user=alice, run_id=run.pk).scorers

    assert [s.scored for s in before] == [1, 1]
    assert [s.scored for s in after] == [3, 3]


def _selects_of_runs(client: Client, url: str, **headers: str) -> list[str]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as captured:
        response = client.get(url, headers=headers)
    assert response.status_code == 200
    return [
        q["sql"]
        for q in captured.captured_queries
        if 'FROM "runs_run"' in q["sql"] and "COUNT(" not in q["sql"]
    ]


@pytest.mark.django_db
def test_api_run_list_reads_runs_without_their_projects_and_datasets(
    alice: User, project: Project
) -> None:
    _finished_run(project, 2)
    _key, plain = api_key_create(user=alice, name="shape")

    selects = _selects_of_runs(
        Client(), "/api/v1/runs", Authorization=f"Bearer {plain}"
    )

    # The cache key's rows (before and after) and the runs the answer shows.
    assert len(selects) == 3
    assert not [sql for sql in selects if '"runs_dataset"' in sql]


@pytest.mark.django_db
def test_run_list_page_does_not_read_the_runs_configuration(
    alice_client: Client, project: Project
) -> None:
    _finished_run(project, 2)

    selects = _selects_of_runs(alice_client, "/")

    assert len(selects) == 1
    assert '"target_config"' not in selects[0]
    assert '"options"' not in selects[0]


# -- sessions ----------------------------------------------------------------------


def _session_reads(client: Client, url: str) -> int:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as captured:
        response = client.get(url)
    assert response.status_code == 200
    return sum('"django_session"' in q["sql"] for q in captured.captured_queries)


@pytest.mark.django_db
def test_a_signed_in_page_reads_its_session_from_the_cache(
    alice_client: Client, project: Project
) -> None:
    alice_client.get("/")

    assert _session_reads(alice_client, "/") == 0


@pytest.mark.django_db
def test_a_session_ended_by_signing_out_is_refused_although_it_was_cached(
    alice_client: Client, project: Project
) -> None:
    cookie = alice_client.cookies["sessionid"].value
    assert alice_client.get("/").status_code == 200

    alice_client.post(reverse("logout"))
    replay = Client()
    replay.cookies["sessionid"] = cookie

    assert replay.get("/").status_code == 302


@pytest.mark.django_db
def test_a_cached_session_ends_when_its_user_is_deactivated(
    alice: User, alice_client: Client, project: Project
) -> None:
    assert alice_client.get("/").status_code == 200

    User.objects.filter(pk=alice.pk).update(is_active=False)

    assert alice_client.get("/").status_code == 302


@pytest.mark.django_db
def test_run_list_with_the_demo_button_reads_five_times(
    alice_client: Client, project: Project, django_assert_max_num_queries: Any
) -> None:
    from runs.models import Target

    _finished_run(project, 2, name="arith")
    Target.objects.create(project=project, name="Demo model", kind="demo", config={})
    alice_client.get("/")

    # The user, the count, the runs, the projects of the filter and the demo
    # button's choice (one statement); the session comes from the cache.
    with django_assert_max_num_queries(5):
        response = alice_client.get("/")

    assert "Start the demo run" in response.content.decode()
