"""Personas and shared fixtures.

alice owns the project (admin), bob is an editor in it, victor only views it,
and mallory belongs to another project: every page and endpoint must refuse
her.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
import pytest_django
from channels.layers import channel_layers
from django.conf import settings as django_settings
from django.contrib.auth.models import User
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test import Client

from runs.models import Membership, Project
from runs.records import cache_keys
from runs.testing.fake_openai import FakeOpenAIServer
from tests.browser import seeded_site, server  # noqa: F401  (fixtures)
from tests.factories import arithmetic_items, make_dataset
from tests.flush import quick_flush
from tests.processes import data_dir, migrated_db, migrated_site  # noqa: F401
from tests.queries import guard_captured_queries

PASSWORD = "correct-horse-battery-staple"

# The suite's model servers (runs/testing/fake_openai.py, tests/local_http.py)
# listen on loopback, which the shipped network policy refuses: the suite
# allows it, in this process (whose settings are already read) and in every
# process it starts. tests/test_netpolicy_default.py checks the shipped default.
SUITE_TARGET_ALLOW = ["loopback", "public"]
os.environ["EVALSITE_TARGET_ALLOW"] = ",".join(SUITE_TARGET_ALLOW)
django_settings.EVALSITE_TARGET_ALLOW = SUITE_TARGET_ALLOW


def _user(username: str) -> User:
    return User.objects.create_user(username, f"{username}@example.org", PASSWORD)


@pytest.fixture
def alice(db: None) -> User:
    return _user("alice")


@pytest.fixture
def bob(db: None) -> User:
    return _user("bob")


@pytest.fixture
def victor(db: None) -> User:
    return _user("victor")


@pytest.fixture
def mallory(db: None) -> User:
    return _user("mallory")


@pytest.fixture
def project(alice: User, bob: User, victor: User) -> Project:
    project = Project.objects.create(name="Research")
    Membership.objects.create(project=project, user=alice, role=Membership.Role.ADMIN)
    Membership.objects.create(project=project, user=bob, role=Membership.Role.EDITOR)
    Membership.objects.create(project=project, user=victor, role=Membership.Role.VIEWER)
    return project


@pytest.fixture
def held_second(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Hold the second a going run's keys count by
    (``cache_keys.going_second``); move it with ``held_second[0] += 1``."""
    second = [cache_keys.going_second()]
    monkeypatch.setattr(cache_keys, "going_second", lambda: second[0])
    return second


@pytest.fixture
def other_project(mallory: User) -> Project:
    project = Project.objects.create(name="Elsewhere")
    Membership.objects.create(project=project, user=mallory, role=Membership.Role.ADMIN)
    return project


@pytest.fixture
def dataset(project: Project):
    return make_dataset(project, arithmetic_items(10))


def _client_for(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def alice_client(alice: User) -> Client:
    return _client_for(alice)


@pytest.fixture
def bob_client(bob: User) -> Client:
    return _client_for(bob)


@pytest.fixture
def victor_client(victor: User) -> Client:
    return _client_for(victor)


@pytest.fixture
def mallory_client(mallory: User, other_project: Project) -> Client:
    return _client_for(mallory)


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAIServer]:
    """A real local HTTP server that speaks the OpenAI chat protocol."""
    fake = FakeOpenAIServer()
    fake.start()
    try:
        yield fake
    finally:
        fake.stop()


@pytest.fixture
def migrator(transactional_db: None) -> Iterator[MigrationExecutor]:
    """Migrations executed by the test, the database left at the latest ones."""
    executor = MigrationExecutor(connection)
    try:
        yield executor
    finally:
        executor.loader.build_graph()
        executor.migrate(executor.loader.graph.leaf_nodes())


@pytest.fixture(scope="session", autouse=True)
def _quick_flush(
    django_db_setup: None, django_db_blocker: pytest_django.DjangoDbBlocker
) -> Iterator[None]:
    """Transactional tests' flushes skip work that changes nothing
    (tests/flush.py says what and why)."""
    with quick_flush(django_db_blocker):
        yield


@pytest.fixture(scope="session", autouse=True)
def _close_executor_connections(
    django_db_setup: None, django_db_blocker: pytest_django.DjangoDbBlocker
) -> Iterator[None]:
    """Close the connections that executor threads opened, before the test
    database is dropped (PostgreSQL refuses to drop a database in use)."""
    yield
    import asyncio

    from asgiref.sync import sync_to_async
    from django.db import connections

    # Thread-sensitive calls made outside async_to_sync share one thread.
    asyncio.run(sync_to_async(connections.close_all)())
    connection = connections["default"]
    if connection.vendor == "postgresql":
        # Threads of the server's pools (the API keys' usage writer, the
        # scorers' threads) keep their connections for CONN_MAX_AGE, beyond
        # any test: they would keep the test database from being dropped.
        with django_db_blocker.unblock(), connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
        connection.close()


def pytest_configure(config: pytest.Config) -> None:
    from django.conf import settings

    # Hashing a password properly takes a good part of a second; tests make many.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    # A count of queries read after a later request emptied the log fails.
    guard_captured_queries()


# Fixtures whose tests run their programs (a Daphne server, manage.py,
# evalrun) on a SQLite database of their own, with DATABASE_URL and REDIS_URL
# taken out of the programs' environment: what they check does not depend on
# the pass's database or channel layer. The own_sqlite marker says so of a
# test that makes such a database itself (tests.processes.env_for on a
# directory of its own).
OWN_SQLITE_FIXTURES = {"server", "data_dir", "migrated_db"}
# Fixtures (and the marker below) that reach the pass's database in process.
PASS_DATABASE_FIXTURES = {"db", "transactional_db"}


def reaches_pass_database(item: pytest.Item) -> bool:
    names = set(getattr(item, "fixturenames", ()))
    return bool(names & PASS_DATABASE_FIXTURES) or (
        item.get_closest_marker("django_db") is not None
    )


def runs_on_its_own_sqlite(item: pytest.Item) -> bool:
    names = set(getattr(item, "fixturenames", ()))
    return bool(
        names & OWN_SQLITE_FIXTURES or item.get_closest_marker("own_sqlite")
    ) and not reaches_pass_database(item)


def uses_no_database(item: pytest.Item) -> bool:
    """Marked no_database (a sandbox's programs, say): no database, no
    channel layer, in the test or in what it starts."""
    marked = item.get_closest_marker("no_database") is not None
    return marked and not reaches_pass_database(item)


SAME_IN_BOTH = pytest.StashKey[int]()
NO_DATABASE = pytest.StashKey[int]()


def pytest_collection_modifyitems(
    config: pytest.Config, items: list[pytest.Item]
) -> None:
    """In the PostgreSQL pass that scripts/test.sh runs beside the SQLite
    pass, leave out the tests that would run exactly as they do there."""
    if os.environ.get("EVALSITE_TEST_PASS") != "postgres":
        return
    kept, same, free = [], [], []
    for item in items:
        if runs_on_its_own_sqlite(item):
            same.append(item)
        elif uses_no_database(item):
            free.append(item)
        else:
            kept.append(item)
    if same or free:
        config.hook.pytest_deselected(items=same + free)
        items[:] = kept
        config.stash[SAME_IN_BOTH] = len(same)
        config.stash[NO_DATABASE] = len(free)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """A pytest-xdist worker hands its count of the tests left out to the
    process that prints the summary."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["same_in_both"] = session.config.stash.get(SAME_IN_BOTH, 0)
        workeroutput["no_database"] = session.config.stash.get(NO_DATABASE, 0)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """Every worker collects the whole suite and leaves out the same tests:
    the summary says how many once, not once a worker."""
    same = getattr(node, "workeroutput", {}).get("same_in_both", 0)
    if same:
        node.config.stash[SAME_IN_BOTH] = same
    free = getattr(node, "workeroutput", {}).get("no_database", 0)
    if free:
        node.config.stash[NO_DATABASE] = free


def worker_redis_url(url: str, worker: int) -> str:
    """The Redis database of the ``worker``-th pytest-xdist worker: the one
    ``url`` names, plus the worker's number."""
    parts = urlsplit(url)
    database = int(parts.path.strip("/") or 0) + worker
    return urlunsplit(parts._replace(path=f"/{database}"))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_setupnodes(config: pytest.Config, specs: list[Any]) -> None:
    """Each pytest-xdist worker of a pass starts with a Redis database of its
    own in REDIS_URL: workers on one database would count each other's tries,
    leases and limits (run and user ids repeat from one test database to
    another) and delete each other's keys between tests. Set in the worker's
    environment before it starts, it is what the settings, the tests and every
    program a test starts read."""
    url = os.environ.get("REDIS_URL")
    if not url:
        return
    for spec in specs:
        spec.env["REDIS_URL"] = worker_redis_url(url, int(spec.id.removeprefix("gw")))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    same = terminalreporter.config.stash.get(SAME_IN_BOTH, 0)
    if same:
        terminalreporter.write_line(
            f"{same} tests that run their programs on a SQLite database of their "
            "own ran in the SQLite pass and were left out of this one"
        )
    free = terminalreporter.config.stash.get(NO_DATABASE, 0)
    if free:
        terminalreporter.write_line(
            f"{free} tests that use no database ran in the SQLite pass and were "
            "left out of this one"
        )


# Modules whose tests start sandboxed programs and check that none is left.
SANDBOX_MODULES = (
    "tests.sandbox.",
    "tests.scorers.test_code_exec",
    "tests.agents.test_tools",
    "tests.test_evalrun_humaneval",
)


@pytest.fixture(autouse=True)
def _one_sandbox_test_at_a_time(request: pytest.FixtureRequest) -> Iterator[None]:
    """Sandbox tests of every pytest process on this machine take turns.

    ``make test`` runs its SQLite and PostgreSQL passes at once; a test that
    checks no sandbox process or directory is left would otherwise see the
    other pass's programs. An exclusive lock on a file both passes share.
    """
    if not request.module.__name__.startswith(SANDBOX_MODULES):
        yield
        return
    import fcntl
    import tempfile
    from pathlib import Path

    lock = Path(tempfile.gettempdir()) / "evalsite-tests-sandbox-turn.lock"
    with lock.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@pytest.fixture(autouse=True)
def _runs_end_before_the_database_is_flushed(
    request: pytest.FixtureRequest,
) -> Iterator[None]:
    """A transactional test's database is flushed only once the launcher's runs
    and scoring passes in this process have ended: a run reported final still
    stores its figures (``runs/analysis/figures.py``), and a flush under that
    write fails."""
    marker = request.node.get_closest_marker("django_db")
    transactional = marker is not None and (
        marker.kwargs.get("transaction") or (marker.args and marker.args[0])
    )
    if not transactional:
        yield
        return
    request.getfixturevalue("transactional_db")  # torn down after this one
    yield
    import time

    from runs.executor import launchers

    launcher = launchers._launcher
    deadline = time.monotonic() + 30
    # ``busy`` counts a run launched as the test ended, before its task exists.
    while launcher is not None and launcher.busy:
        if time.monotonic() > deadline:
            break  # a run that never ends: the test itself says so
        time.sleep(0.02)


@pytest.fixture(autouse=True)
def _empty_page_cache() -> None:
    """Each test starts without the pages and answers earlier tests cached
    (runs/records/pagecache.py): keyed by what they show, an earlier test's page for
    the same ids and data would be served without running the view."""
    from django.core.cache import caches

    caches["default"].clear()


@pytest.fixture(autouse=True)
def _fresh_channel_layer() -> Iterator[None]:
    """Each test gets channel layers of its own. The Redis layer keeps the
    messages of all of a process's channels under one key, with one capacity:
    a test that flooded a page and left before it read everything left the
    capacity's worth behind (for the layer's expiry, 30 s), and every event
    sent to the next test's channels in that process was dropped as over
    capacity (that test then saw none)."""
    channel_layers.backends.clear()
    yield
    channel_layers.backends.clear()


@pytest.fixture(autouse=True)
def _fresh_try_counts() -> None:
    """Each test starts with no tries counted against its users (ids repeat
    from test to test: the rate of one would refuse the next)."""
    from django.conf import settings

    from runs.records.installation import database_id
    from runs.targets import try_throttle

    try_throttle.PROCESS.clear()
    # Only once the test database is in place: before, the connection names
    # the installation's own database, whose users' tries are not ours.
    where = connection.settings_dict
    if settings.REDIS_URL and where["NAME"] == where.get("TEST", {}).get("NAME"):
        import redis

        with redis.Redis.from_url(settings.REDIS_URL) as client:
            # SCAN's default step of 10 keys made this a round trip per ten
            # keys in the database (sessions, channel messages), every test.
            # Only this test database's: another suite may share the Redis.
            mine = f"{try_throttle.REDIS_PREFIX}{database_id()}:*"
            keys = list(client.scan_iter(mine, count=100_000))
            if keys:
                client.delete(*keys)
