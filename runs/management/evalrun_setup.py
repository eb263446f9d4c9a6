"""Who and where evalrun acts: the database made ready, the user and project chosen.

On a fresh install the command is the only one a person needs: it migrates
the database, creates the local operator account (an ordinary user without a
password, who cannot log in to the dashboard) and its project, and says so
in one line. Later, without ``--user``, it acts as the only user, else as
the local operator account, else as the only superuser; anything else is
ambiguous and refused, naming the users to choose from.
"""

from __future__ import annotations

import pkgutil
from dataclasses import dataclass, field
from importlib import import_module

from django.apps import apps
from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.loader import MigrationLoader
from django.db.migrations.recorder import MigrationRecorder

from runs.access import Action, projects_where
from runs.management.evalrun_cli import BadInput
from runs.models import Project
from runs.projects.services import project_get_or_create

DEFAULT_PROJECT = "Default"
LOCAL_OPERATOR = "operator"
USERS_NAMED = 5  # in the message that asks for --user


@dataclass
class Setup:
    """What was made or chosen on the way, for the one line that says so."""

    migrated: bool = False
    notes: list[str] = field(default_factory=list)

    def line(self) -> str:
        if not self.notes:
            return ""
        hint = " (--user and --project choose others)" if self.migrated else ""
        return ", ".join(self.notes) + hint


def database_prepare(setup: Setup) -> None:
    """Apply the migrations this database lacks (all of them on a fresh install)."""
    connection = connections[DEFAULT_DB_ALIAS]
    if "django_migrations" in connection.introspection.table_names():
        if migrations_on_disk() <= set(
            MigrationRecorder(connection).applied_migrations()
        ):
            return
        executor = MigrationExecutor(connection)
        if not executor.migration_plan(executor.loader.graph.leaf_nodes()):
            return
        what = "brought the database up to date"
    else:
        what = "set up a new database"
    call_command("migrate", interactive=False, verbosity=0)
    setup.migrated = True
    setup.notes.append(what)


def migrations_on_disk() -> set[tuple[str, str]]:
    """(app label, name) of every migration file, found as Django's loader finds
    them but without importing them: loading the migration graph imports every
    migration of every app, most of the check on an up-to-date database. When
    all of them are recorded as applied, nothing is left to apply; otherwise
    the loader's plan decides (squashed migrations, replaced ones)."""
    found: set[tuple[str, str]] = set()
    for app in apps.get_app_configs():
        name, explicit = MigrationLoader.migrations_module(app.label)
        if name is None:
            continue
        try:
            module = import_module(name)
        except ModuleNotFoundError as exc:
            if explicit or "migrations" not in (exc.name or "").split("."):
                raise  # as the loader does
            continue  # an app without migrations
        if not hasattr(module, "__path__"):
            continue
        found.update(
            (app.label, migration)
            for _, migration, is_pkg in pkgutil.iter_modules(module.__path__)
            if not is_pkg and migration[0] not in "_~"
        )
    return found


def acting_user(username: str | None, setup: Setup | None = None) -> User:
    """The user named; else the one evalrun may act as without being told."""
    users = get_user_model().objects.filter(is_active=True)
    field_name = get_user_model().USERNAME_FIELD
    if username:
        user = users.filter(**{field_name: username}).first()
        if user is None:
            raise BadInput(f"--user: no active user {username!r}")
        return user
    found = list(users.order_by(field_name)[: USERS_NAMED + 1])
    if len(found) == 1:
        return found[0]
    if not found:
        return operator_create(setup)
    operator = users.filter(**{field_name: LOCAL_OPERATOR}).first()
    if operator is not None:
        note(setup, f"acting as the local operator account {LOCAL_OPERATOR!r}")
        return operator
    superusers = list(users.filter(is_superuser=True)[:2])
    if len(superusers) == 1:
        name = superusers[0].get_username()
        note(setup, f"acting as {name!r}, the only superuser (--user chooses another)")
        return superusers[0]
    names = ", ".join(repr(u.get_username()) for u in found[:USERS_NAMED])
    more = ", ..." if len(found) > USERS_NAMED else ""
    raise BadInput(
        f"several users exist ({names}{more}) and none is the one to act as "
        f"without being told (the local operator account {LOCAL_OPERATOR!r}, "
        "or the only superuser): give --user USERNAME"
    )


def operator_create(setup: Setup | None) -> User:
    """The local operator account: no password, so no log-in to the dashboard
    (``manage.py changepassword operator`` gives one)."""
    user = get_user_model().objects.create_user(LOCAL_OPERATOR)
    note(setup, f"created the local operator account {LOCAL_OPERATOR!r}")
    return user


def acting_project(user: User, name: str | None, setup: Setup | None = None) -> Project:
    """The named project among the user's, else the user's only one, else a
    new one called ``Default``."""
    if name:
        return project_get_or_create(name=name, user=user)
    projects = list(projects_where(user, Action.EDIT).order_by("name")[:5])
    if len(projects) == 1:
        return projects[0]
    if not projects:
        project = project_get_or_create(name=DEFAULT_PROJECT, user=user)
        if setup is not None and setup.notes:  # said along with the rest only
            setup.notes.append(f"created the project {DEFAULT_PROJECT!r}")
        return project
    names = ", ".join(repr(p.name) for p in projects)
    raise BadInput(f"you may run in several projects ({names}): give --project NAME")


def note(setup: Setup | None, text: str) -> None:
    if setup is not None:
        setup.notes.append(text)
