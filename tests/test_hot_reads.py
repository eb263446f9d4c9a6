"""The plain-SQL reads of the busiest pages agree with their ORM twins."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from runs.access import visible_projects
from runs.models import Dataset, Project, Run, RunStatus, ScoringPass
from runs.projects.services import API_KEY_PREFIX, api_key_create
from runs.records import reads
from runs.results.selectors import run_list
from tests.factories import arithmetic_items, echo_run, make_dataset


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
    assert [dict(row)["id"] for row in rows] == [done.pk]
    with pytest.raises(ValueError, match="'target'"):
        reads.run_records(user_id=alice.pk, filters={"target": 1}, offset=0, limit=10)


@pytest.mark.django_db
def test_run_page_state_only_for_members_and_finished_runs_without_a_rescore(
    alice: User, mallory: User, project: Project, other_project: Project
) -> None:
    dataset = make_dataset(project, arithmetic_items(2))
    done, going = _runs(dataset, [RunStatus.COMPLETED, RunStatus.RUNNING])

    state = reads.run_page_state(user_id=alice.pk, run_id=done.pk)

    assert state is not None
    assert reads.run_page_state(user_id=mallory.pk, run_id=done.pk) is None
    assert reads.run_page_state(user_id=alice.pk, run_id=going.pk) is None
    # The user's role is part of it: another member's state differs.
    bob = project.memberships.get(role="editor").user
    assert reads.run_page_state(user_id=bob.pk, run_id=done.pk) != state

    ScoringPass.objects.create(run=done, status=ScoringPass.Status.RUNNING)
    assert reads.run_page_state(user_id=alice.pk, run_id=done.pk) is None
