"""Who evalrun acts as, and the database it makes ready, without being told."""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from runs.management.evalrun_cli import BadInput
from runs.management.evalrun_setup import (
    LOCAL_OPERATOR,
    Setup,
    acting_user,
    database_prepare,
)
from tests.test_evalrun_command import run_cli, write_items

User = get_user_model()


def evalrun_demo(dataset: Path, *extra: str) -> list[str]:
    return [
        *(sys.executable, "manage.py", "evalrun", str(dataset)),
        *("--target", "demo", "--scorer", "exact_match", "--json", *extra),
    ]


@pytest.mark.own_sqlite
def test_evalrun_on_a_fresh_install_sets_it_up_and_says_so_in_one_line(tmp_path):
    data_dir = tmp_path / "data"  # not even the directory exists
    dataset = write_items(tmp_path / "items.jsonl", 2)

    first = run_cli(evalrun_demo(dataset), data_dir)
    second = run_cli(evalrun_demo(dataset), data_dir)

    assert first.returncode == 0, first.stderr
    said, started = first.stderr.splitlines()[:2]
    assert said == (
        "set up a new database, created the local operator account 'operator', "
        "created the project 'Default' (--user and --project choose others)"
    )
    assert started == "run 1 started"
    assert json.loads(first.stdout)["status"] == "completed"
    # Set up once: the next run says nothing of it.
    assert second.returncode == 0, second.stderr
    assert second.stderr.splitlines()[0] == "run 2 started"


def test_name_names_the_run_and_dataset_name_the_dataset(data_dir, tmp_path):
    dataset = write_items(tmp_path / "items.jsonl", 2)

    done = run_cli(
        evalrun_demo(dataset, "--name", "first try", "--dataset-name", "sums"),
        data_dir,
    )

    assert done.returncode == 0, done.stderr
    with sqlite3.connect(data_dir / "evalsite.sqlite3") as db:
        assert db.execute("select name from runs_run").fetchall() == [("first try",)]
        assert db.execute("select name from runs_dataset").fetchall() == [("sums",)]


def test_run_name_still_names_the_run_and_gives_its_new_name(data_dir, tmp_path):
    dataset = write_items(tmp_path / "items.jsonl", 2)

    done = run_cli(evalrun_demo(dataset, "--run-name", "old habit"), data_dir)

    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[0] == "--run-name is now --name (the run's name)"
    with sqlite3.connect(data_dir / "evalsite.sqlite3") as db:
        assert db.execute("select name from runs_run").fetchall() == [("old habit",)]
        assert db.execute("select name from runs_dataset").fetchall() == [("items",)]


@pytest.mark.django_db
def test_a_migrated_database_is_left_as_it_is() -> None:
    setup = Setup()

    database_prepare(setup)

    assert not setup.migrated and setup.line() == ""


@pytest.mark.django_db
def test_the_only_user_is_acted_as_without_a_word() -> None:
    only = User.objects.create_user("researcher")
    setup = Setup()

    assert acting_user(None, setup) == only
    assert setup.line() == ""


@pytest.mark.django_db
def test_among_several_users_the_only_superuser_is_acted_as() -> None:
    User.objects.create_user("demo")
    admin = User.objects.create_superuser("admin")
    setup = Setup()

    assert acting_user(None, setup) == admin
    assert setup.line() == (
        "acting as 'admin', the only superuser (--user chooses another)"
    )


@pytest.mark.django_db
def test_the_local_operator_account_comes_before_a_superuser() -> None:
    User.objects.create_user("demo")
    User.objects.create_superuser("admin")
    operator = User.objects.create_user(LOCAL_OPERATOR)

    assert acting_user(None) == operator


@pytest.mark.django_db
def test_a_user_named_is_acted_as() -> None:
    User.objects.create_user(LOCAL_OPERATOR)
    demo = User.objects.create_user("demo")

    assert acting_user("demo") == demo


@pytest.mark.django_db
def test_several_users_and_no_one_to_choose_is_refused_naming_them() -> None:
    User.objects.create_user("ann")
    User.objects.create_user("bo")
    User.objects.create_superuser("root1")
    User.objects.create_superuser("root2")

    with pytest.raises(BadInput) as refused:
        acting_user(None)

    assert refused.value.returncode == 2
    assert "'ann', 'bo', 'root1', 'root2'" in str(refused.value)
    assert "give --user USERNAME" in str(refused.value)


@pytest.mark.django_db
def test_no_user_at_all_creates_the_local_operator_account_without_a_password():
    setup = Setup()

    user = acting_user(None, setup)

    assert user.get_username() == LOCAL_OPERATOR
    assert not user.has_usable_password() and not user.is_superuser
    assert setup.notes == ["created the local operator account 'operator'"]
