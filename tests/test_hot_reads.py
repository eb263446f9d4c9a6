"""The compiled reads of the busiest pages agree with their ORM twins, column
by column of the models' ``_meta``."""

from __future__ import annotations

import json
from dataclasses import fields
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.db.backends.sqlite3.base import SQLiteCursorWrapper
from django.db.models import JSONField
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from psycopg import ClientCursor

from runs.access import visible_projects
from runs.analysis.figures import run_figures, run_figures_store
from runs.models import (
    ApiKey,
    Dataset,
    Project,
    RetryPass,
    Run,
    RunFigures,
    RunStatus,
    ScoringPass,
)
from runs.projects.services import API_KEY_PREFIX, api_key_create
from runs.records import cache_keys, compiled, page_state, reads
from runs.records.versions import results_changed
from runs.records.visible_run import run_visible, run_visible_with_related
from runs.results.selectors import run_list
from tests.factories import arithmetic_items, echo_run, make_dataset, store_outcomes


def _runs(dataset: Dataset, statuses: list[str]) -> list[Run]:
    runs = []
    for n, status in enumerate(statuses):
        run = echo_run(dataset)
        Run.objects.filter(pk=run.pk).update(
            status=status, name=f"run <{n}>", succeeded=n, failed=1
        )
        runs.append(run)
    return runs


@pytest.mark.django_db
def test_run_table_lists_what_run_list_lists(
    alice: User, project: Project, other_project: Project
) -> None:
    dataset = make_dataset(project, arithmetic_items(3))
    elsewhere = make_dataset(other_project, arithmetic_items(2), name="other")
    _runs(dataset, [RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.COMPLETED])
    _runs(elsewhere, [RunStatus.COMPLETED])
    orm = list(run_list(user=alice).order_by("-created_at", "-id"))

    table = reads.RunTable(user_id=alice.pk)
    rows = table[0:10]

    assert table.count() == 3
    assert [row.pk for row in rows] == [run.pk for run in orm]
    for row, run in zip(rows, orm, strict=True):
        assert (str(row), row.status, row.status_label) == (
            str(run),
            run.status,
            run.get_status_display(),
        )
        assert (row.processed, row.total, row.created_at) == (
            run.processed,
            run.total,
            run.created_at,
        )
        assert (row.project_name, row.dataset_id, row.dataset_name) == (
            run.project.name,
            run.dataset_id,
            run.dataset.name,
        )
        assert row.dataset_version == run.dataset.version
    assert [row.pk for row in table[1:2]] == [orm[1].pk]


@pytest.mark.django_db
def test_run_table_filters_by_project_and_status_within_the_users_projects(
    alice: User, project: Project, other_project: Project
) -> None:
    dataset = make_dataset(project, arithmetic_items(3))
    elsewhere = make_dataset(other_project, arithmetic_items(2), name="other")
    _done, failed = _runs(dataset, [RunStatus.COMPLETED, RunStatus.FAILED])
    _runs(elsewhere, [RunStatus.FAILED])

    by_status = reads.RunTable(user_id=alice.pk, status=RunStatus.FAILED)
    outside = reads.RunTable(user_id=alice.pk, project_id=other_project.pk)

    assert [row.pk for row in by_status[0:10]] == [failed.pk]
    assert outside.count() == 0
    assert outside[0:10] == []


@pytest.mark.django_db
def test_run_rows_say_when_a_running_run_has_no_heartbeat(
    alice: User, project: Project
) -> None:
    dataset = make_dataset(project, arithmetic_items(2))
    quiet, beating = _runs(dataset, [RunStatus.RUNNING, RunStatus.RUNNING])
    now = timezone.now()
    Run.objects.filter(pk=quiet.pk).update(heartbeat_at=now - timedelta(minutes=5))
    Run.objects.filter(pk=beating.pk).update(heartbeat_at=now)

    rows = {row.pk: row for row in reads.RunTable(user_id=alice.pk)[0:10]}

    assert rows[quiet.pk].stale is True
    assert rows[beating.pk].stale is False
    assert Run.objects.get(pk=quiet.pk).alive is False
    assert rows[beating.pk].created_ago.endswith("ago") or (
        rows[beating.pk].created_ago == "now"
    )


@pytest.mark.django_db
def test_project_choices_are_the_users_projects_by_name(
    alice: User, project: Project, other_project: Project
) -> None:
    second = Project.objects.create(name="Another")
    second.memberships.create(user=alice, role="viewer")

    choices = reads.project_choices(user_id=alice.pk)

    assert [(c.pk, c.name) for c in choices] == [
        (p.pk, p.name) for p in visible_projects(alice).order_by("name")
    ]
    assert other_project.pk not in [c.pk for c in choices]


@pytest.mark.django_db
def test_api_key_with_user_reads_the_key_and_its_user_as_the_orm_does(
    alice: User,
) -> None:
    key, plain = api_key_create(user=alice, name="k")
    prefix = plain.removeprefix(API_KEY_PREFIX).split("_")[0]

    read = reads.api_key_with_user(prefix)

    assert read is not None
    assert (read.pk, read.key_hash, read.created_at, read.last_used_at) == (
        key.pk,
        key.key_hash,
        key.created_at,
        key.last_used_at,
    )
    fresh = User.objects.get(pk=alice.pk)
    assert read.user.pk == alice.pk
    assert (read.user.username, read.user.is_active, read.user.is_superuser) == (
        fresh.username,
        True,
        False,
    )
    assert read.user.date_joined == fresh.date_joined
    assert read.user.password == fresh.password


@pytest.mark.django_db
def test_api_key_with_user_refuses_revoked_keys_and_inactive_users(
    alice: User, bob: User
) -> None:
    revoked, revoked_plain = api_key_create(user=alice, name="old")
    _key, bob_plain = api_key_create(user=bob, name="b")
    revoked.revoked_at = timezone.now()
    revoked.save()
    User.objects.filter(pk=bob.pk).update(is_active=False)

    def prefix(plain: str) -> str:
        return plain.removeprefix(API_KEY_PREFIX).split("_")[0]

    assert reads.api_key_with_user(prefix(revoked_plain)) is None
    assert reads.api_key_with_user(prefix(bob_plain)) is None
    assert reads.api_key_with_user("nosuchprefix") is None


@pytest.mark.django_db
def test_run_records_are_scoped_filtered_and_refuse_unknown_filters(
    alice: User, project: Project, other_project: Project
) -> None:
    dataset = make_dataset(project, arithmetic_items(2))
    elsewhere = make_dataset(other_project, arithmetic_items(2), name="other")
    done, _failed = _runs(dataset, [RunStatus.COMPLETED, RunStatus.FAILED])
    _runs(elsewhere, [RunStatus.COMPLETED])
    filters = {"project": None, "dataset": None, "status": RunStatus.COMPLETED}

    count, rows = reads.run_records(
        user_id=alice.pk, filters=filters, offset=0, limit=10
    )

    assert count == 1
    names, values = rows
    assert [dict(zip(names, row, strict=True))["id"] for row in values] == [done.pk]
    with pytest.raises(ValueError, match="'target'"):
        reads.run_records(user_id=alice.pk, filters={"target": 1}, offset=0, limit=10)


@pytest.mark.django_db
def test_run_page_state_only_for_members_and_finished_runs_without_a_rescore(
    alice: User, mallory: User, project: Project, other_project: Project
) -> None:
    dataset = make_dataset(project, arithmetic_items(2))
    done, going = _runs(dataset, [RunStatus.COMPLETED, RunStatus.RUNNING])

    state = page_state.run_page_state(user_id=alice.pk, run_id=done.pk)

    assert state is not None
    assert page_state.run_page_state(user_id=mallory.pk, run_id=done.pk) is None
    assert page_state.run_page_state(user_id=alice.pk, run_id=going.pk) is None
    # The user's role is part of it: another member's state differs.
    bob = project.memberships.get(role="editor").user
    assert page_state.run_page_state(user_id=bob.pk, run_id=done.pk) != state

    ScoringPass.objects.create(run=done, status=ScoringPass.Status.RUNNING)
    assert page_state.run_page_state(user_id=alice.pk, run_id=done.pk) is None


def _run_columns() -> dict[str, str]:
    """The run's columns as run_records names them: JSON as ``<name>_json``."""
    return {
        (f"{f.attname}_json" if isinstance(f, JSONField) else f.attname): f.attname
        for f in Run._meta.concrete_fields
    }


@pytest.mark.django_db
def test_run_records_hold_every_column_of_the_run_as_the_orm_reads_it(
    alice: User, project: Project
) -> None:
    dataset = make_dataset(project, arithmetic_items(2))
    (run,) = _runs(dataset, [RunStatus.COMPLETED])
    Run.objects.filter(pk=run.pk).update(
        finished_at=timezone.now(), cost=1.25, options={"b": [1, 2], "a": "é"}
    )

    _count, (names, (row,)) = reads.run_records(
        user_id=alice.pk, filters={}, offset=0, limit=10
    )

    columns = _run_columns()
    read = dict(zip(names, row, strict=True))
    assert set(read) == set(columns)
    orm = Run.objects.values(*columns.values()).get(pk=run.pk)
    for name, attname in columns.items():
        value = read[name]
        if name != attname and value is not None:
            value = json.loads(value)
        elif isinstance(value, datetime) and value.tzinfo is None:
            # SQLite hands datetimes back naive, in UTC.
            value = value.replace(tzinfo=UTC)
        elif isinstance(orm[attname], bool):
            value = bool(value)
        assert value == orm[attname], name


@pytest.mark.django_db
def test_the_key_and_user_reads_hold_every_column_as_the_orm_reads_it(
    alice: User,
) -> None:
    User.objects.filter(pk=alice.pk).update(last_login=timezone.now())
    key, plain = api_key_create(user=alice, name="k")
    prefix = plain.removeprefix(API_KEY_PREFIX).split("_")[0]

    read = reads.api_key_with_user(prefix)
    user = reads.user_by_id(str(alice.pk))

    assert read is not None and user is not None
    fresh_key = ApiKey.objects.get(pk=key.pk)
    fresh_user = User.objects.get(pk=alice.pk)
    for field in ApiKey._meta.concrete_fields:
        assert getattr(read, field.attname) == getattr(fresh_key, field.attname)
    for field in User._meta.concrete_fields:
        assert getattr(read.user, field.attname) == getattr(fresh_user, field.attname)
        assert getattr(user, field.attname) == getattr(fresh_user, field.attname)
    assert reads.user_by_id("not a number") is None


@pytest.mark.django_db
def test_retry_passes_read_every_column_and_author_as_the_orm_does(
    alice: User, project: Project
) -> None:
    dataset = make_dataset(project, arithmetic_items(2))
    run, other = _runs(dataset, [RunStatus.COMPLETED, RunStatus.COMPLETED])
    now = timezone.now()
    carol = User.objects.create_user("carol-retries")
    for n, author in enumerate([alice, None, carol]):
        RetryPass.objects.create(
            run=run,
            created_by=author,
            status=RetryPass.Status.COMPLETED,
            statuses=["failed", "timed_out"][: n + 1],
            results=n,
            started_at=now,
            finished_at=now + timedelta(seconds=n),
        )
    RetryPass.objects.create(run=other, created_by=alice)

    read = reads.retry_passes(run_id=run.pk)

    orm = list(RetryPass.objects.filter(run=run).select_related("created_by"))
    assert [p.pk for p in read] == [p.pk for p in orm]
    for mine, theirs in zip(read, orm, strict=True):
        for field in RetryPass._meta.concrete_fields:
            assert getattr(mine, field.attname) == getattr(theirs, field.attname)
        if theirs.created_by is None:
            assert mine.created_by is None
            continue
        for field in User._meta.concrete_fields:
            assert getattr(mine.created_by, field.attname) == getattr(
                theirs.created_by, field.attname
            )
    assert [p.created_by for p in read] == [alice, None, carol]
    assert reads.retry_passes(run_id=other.pk + run.pk + 1) == []


@pytest.mark.django_db
def test_run_page_state_holds_every_column_of_the_run_and_its_passes(
    alice: User, project: Project
) -> None:
    dataset = make_dataset(project, arithmetic_items(2))
    (done,) = _runs(dataset, [RunStatus.COMPLETED])
    ScoringPass.objects.create(run=done, status=ScoringPass.Status.COMPLETED)

    state = page_state.run_page_state(user_id=alice.pk, run_id=done.pk)

    assert state is not None
    (run_names, run_row), (pass_names, (pass_row,)) = state
    run = dict(zip(run_names, run_row, strict=True))
    scoring = dict(zip(pass_names, pass_row, strict=True))
    assert set(_run_columns()) <= set(run)
    assert (run["role"], run["project_name"]) == ("admin", project.name)
    assert {
        f"{f.attname}_json" if isinstance(f, JSONField) else f.attname
        for f in ScoringPass._meta.concrete_fields
    } <= set(scoring)


@pytest.mark.django_db
def test_run_visible_reads_every_column_of_the_run_as_the_orm_does(
    alice: User, mallory: User, project: Project
) -> None:
    dataset = make_dataset(project, arithmetic_items(2))
    (run,) = _runs(dataset, [RunStatus.COMPLETED])
    Run.objects.filter(pk=run.pk).update(
        finished_at=timezone.now(), cost=1.25, options={"b": [1, 2], "a": "é"}
    )

    read = run_visible(user_id=alice.pk, run_id=run.pk)

    orm = run_list(user=alice).get(pk=run.pk)
    assert read is not None
    for field in Run._meta.concrete_fields:
        value = getattr(read, field.attname)
        assert value == getattr(orm, field.attname), field.attname
        assert type(value) is type(getattr(orm, field.attname)), field.attname
    assert read.results_version == orm.results_version
    assert run_visible(user_id=mallory.pk, run_id=run.pk) is None
    assert run_visible(user_id=alice.pk, run_id=run.pk + 1000) is None


@pytest.mark.django_db
@pytest.mark.parametrize("created_by", [True, False])
def test_run_visible_with_related_reads_the_run_project_dataset_and_creator(
    alice: User, mallory: User, project: Project, created_by: bool
) -> None:
    dataset = make_dataset(project, arithmetic_items(2))
    (run,) = _runs(dataset, [RunStatus.COMPLETED])
    Run.objects.filter(pk=run.pk).update(
        created_by=alice if created_by else None, options={"b": [1, 2]}
    )

    read = run_visible_with_related(user_id=alice.pk, run_id=run.pk)

    orm = run_list(user=alice).select_related("created_by").get(pk=run.pk)
    assert read is not None
    pairs = [(read, orm), (read.project, orm.project), (read.dataset, orm.dataset)]
    if created_by:
        pairs.append((read.created_by, orm.created_by))
    else:
        assert read.created_by is None and orm.created_by is None
    for mine, theirs in pairs:
        for field in type(theirs)._meta.concrete_fields:
            value = getattr(mine, field.attname)
            assert value == getattr(theirs, field.attname), field.attname
            assert type(value) is type(getattr(theirs, field.attname)), field.attname
    assert run_visible_with_related(user_id=mallory.pk, run_id=run.pk) is None


def test_a_compiled_read_refuses_an_argument_it_did_not_compile() -> None:
    def build(args: compiled.Args) -> Any:
        args.integer("unused")
        return Project.objects.values("id")

    with pytest.raises(ValueError, match="unused"):
        compiled.statement(("test", "unused argument"), build)


def test_a_compiled_read_refuses_columns_without_names() -> None:
    def build(args: compiled.Args) -> Any:
        return Project.objects.filter(pk=args.integer("project_id"))

    with pytest.raises(ValueError, match="distinct column names"):
        compiled.statement(("test", "no values"), build)


@pytest.mark.django_db
def test_a_compiled_read_is_compiled_once_and_takes_its_arguments_by_name(
    project: Project, other_project: Project
) -> None:
    calls = []

    def build(args: compiled.Args) -> Any:
        calls.append(1)
        return Project.objects.filter(name=args.text("name")).values("id", "name")

    read = compiled.statement(("test", "by name"), build)
    again = compiled.statement(("test", "by name"), build)

    assert again is read and len(calls) == 1
    assert compiled.rows(read, {"name": "Elsewhere"}) == [
        {"id": other_project.pk, "name": "Elsewhere"}
    ]
    with pytest.raises(TypeError):
        compiled.rows(read, {"title": "Elsewhere"})


@pytest.mark.django_db
def test_a_compiled_read_on_sqlite_skips_the_placeholder_rewrite_of_every_call(
    alice: User, project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    if connection.vendor != "sqlite":
        pytest.skip("the SQLite cursor's rewrite")
    dataset = make_dataset(project, arithmetic_items(2))
    _runs(dataset, [RunStatus.COMPLETED, RunStatus.RUNNING])
    table = reads.RunTable(user_id=alice.pk, status=RunStatus.COMPLETED)
    expected = (table.count(), table[0:10])
    rewrites = []
    rewrite = SQLiteCursorWrapper.convert_query

    def counted(self: Any, query: str, **kwargs: Any) -> str:
        rewrites.append(query)
        return rewrite(self, query, **kwargs)

    monkeypatch.setattr(SQLiteCursorWrapper, "convert_query", counted)

    assert (table.count(), table[0:10]) == expected
    assert rewrites == []


@pytest.mark.django_db
def test_a_compiled_read_on_postgresql_is_bound_by_the_server(
    alice: User, project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Django's cursors on PostgreSQL bind in the client: every parameter
    # written into the text of every statement (psycopg's ClientCursor), 3 %
    # of a distributed web server's CPU under load.
    if connection.vendor != "postgresql":
        pytest.skip("binding by the PostgreSQL server")
    dataset = make_dataset(project, arithmetic_items(2))
    _runs(dataset, [RunStatus.COMPLETED, RunStatus.RUNNING])
    table = reads.RunTable(user_id=alice.pk, status=RunStatus.COMPLETED)
    with connection.cursor() as cursor:  # as Django reads: the reference
        cursor.execute(
            "SELECT count(*) FROM runs_run r JOIN runs_membership m"
            " ON m.project_id = r.project_id WHERE m.user_id = %s"
            " AND r.status = %s",
            [alice.pk, RunStatus.COMPLETED],
        )
        (expected,) = cursor.fetchone()
    client_bound = []
    bind = ClientCursor.execute

    def counted(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        client_bound.append(query)
        return bind(self, query, *args, **kwargs)

    monkeypatch.setattr(ClientCursor, "execute", counted)

    counts = [table.count() for _ in range(8)]

    assert counts == [expected] * 8 and expected == 1
    assert client_bound == []


def _page_keys_read_thrice(user: User, project: Project) -> list[Any]:
    """A finished run's page key, read three times (on PostgreSQL only)."""
    if connection.vendor != "postgresql":
        pytest.skip("statements prepared by the PostgreSQL server")
    dataset = make_dataset(project, arithmetic_items(2))
    (run,) = _runs(dataset, [RunStatus.COMPLETED])
    return [page_state.run_page_key(user_id=user.pk, run_id=run.pk) for _ in range(3)]


@pytest.mark.django_db
def test_a_compiled_read_on_postgresql_is_prepared_once_per_connection(
    alice: User, project: Project
) -> None:
    # Unprepared, the server planned the run page's read (seven tables
    # joined) on every cached page: 1.7 to 2.5 ms of its CPU, where running
    # it took 0.3 ms.
    states = _page_keys_read_thrice(alice, project)
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        prepared = [row[0] for row in cursor.fetchall()]

    assert states[0] is not None and states == [states[0]] * 3
    assert len([sql for sql in prepared if "runs_scoringpass" in sql]) == 1


@pytest.mark.django_db(transaction=True)
def test_a_connection_that_prepares_nothing_reads_alike_unprepared(
    alice: User, project: Project
) -> None:
    if connection.vendor == "postgresql":
        connection.close()  # a new session: none of its statements prepared yet
        connection.ensure_connection()
        connection.connection.prepare_threshold = None  # EVALSITE_DB_PREPARED=false
    try:
        states = _page_keys_read_thrice(alice, project)
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM pg_prepared_statements")
            (prepared,) = cursor.fetchone()
    finally:
        connection.close()

    assert states[0] is not None and states == [states[0]] * 3
    assert prepared == 0


@pytest.mark.django_db
def test_a_compiled_read_counted_by_a_test_goes_through_djangos_cursor(
    alice: User, project: Project
) -> None:
    dataset = make_dataset(project, arithmetic_items(2))
    _runs(dataset, [RunStatus.COMPLETED, RunStatus.RUNNING, RunStatus.FAILED])
    table = reads.RunTable(user_id=alice.pk)
    direct = (table.count(), table[0:10], reads.project_choices(user_id=alice.pk))

    with CaptureQueriesContext(connection) as captured:
        logged = (table.count(), table[0:10], reads.project_choices(user_id=alice.pk))

    assert logged == direct
    assert len(captured.captured_queries) == 3


@pytest.mark.django_db
def test_every_field_of_a_run_row_is_the_orms(alice: User, project: Project) -> None:
    dataset = make_dataset(project, arithmetic_items(2))
    (run,) = _runs(dataset, [RunStatus.COMPLETED])
    Run.objects.filter(pk=run.pk).update(
        total=9, succeeded=1, failed=2, timed_out=3, cancelled=1, target_kind="echo"
    )
    run = Run.objects.select_related("project", "dataset").get(pk=run.pk)
    related = {
        "pk": run.pk,
        "project_name": run.project.name,
        "dataset_name": run.dataset.name,
        "dataset_version": run.dataset.version,
    }

    (row,) = reads.RunTable(user_id=alice.pk)[0:10]

    for field in fields(reads.RunRow):
        if field.name not in ("stale", "created_ago"):
            expected = related.get(field.name, getattr(run, field.name, None))
            assert getattr(row, field.name) == expected, field.name


@pytest.mark.django_db
def test_run_rows_hold_the_pass_rates_of_the_runs_current_figures(
    alice: User, project: Project
) -> None:
    dataset = make_dataset(project, arithmetic_items(4))
    ended, running = echo_run(dataset), echo_run(dataset)
    outcomes: list[dict[str, Any]] = [
        {"scores": [("exact_match", True, "")]},
        {"scores": [("exact_match", False, "got 5")]},
        {"scores": [("exact_match", False, "got 6")]},
        {"error": ("permanent", "HTTP 400", "bad request")},
    ]
    for run in (ended, running):
        store_outcomes(run, outcomes)
    Run.objects.filter(pk=ended.pk).update(
        status=RunStatus.COMPLETED_WITH_ERRORS, finished_at=timezone.now()
    )
    Run.objects.filter(pk=running.pk).update(status=RunStatus.RUNNING)
    run_figures_store(ended.pk)
    ended.refresh_from_db()
    orm = run_figures(run=ended)[0]

    rows = reads.RunTable(user_id=alice.pk)[0:10]
    rates = reads.run_pass_rates(rows)

    # The ORM's figures, the failed call counted as not passed: 1 of 4.
    assert rates[ended.pk] == tuple((s.scorer, s.pass_rate) for s in orm.scorers)
    assert rates[ended.pk] == (("exact_match", 0.25),)
    assert running.pk not in rates
    assert {row.pk: row.figures_version for row in rows} == {
        ended.pk: RunFigures.objects.get(run=ended).version,
        running.pk: None,
    }
    # Stored figures of other results (a re-score moved the version): none,
    # and the rows (a cached table's key) say the run changed.
    results_changed(ended)
    moved = reads.RunTable(user_id=alice.pk)[0:10]
    assert reads.run_pass_rates(moved) == {}
    assert cache_keys.record(moved[1]) != cache_keys.record(rows[1])
