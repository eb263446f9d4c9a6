"""Projects are created only with their creator as admin."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from runs.errors import Conflict
from runs.models import Membership, Project
from runs.projects.services import project_create, project_get_or_create


def test_get_or_create_makes_the_user_admin_of_a_new_project(bob: User) -> None:
    project = project_get_or_create(name="Scratch", user=bob)

    assert project.memberships.get().user == bob
    assert project.memberships.get().role == Membership.Role.ADMIN


def test_get_or_create_returns_the_users_own_project(bob: User) -> None:
    first = project_get_or_create(name="Scratch", user=bob)

    assert project_get_or_create(name="Scratch", user=bob) == first
    assert Project.objects.count() == 1


def test_get_or_create_never_joins_another_users_project(
    bob: User, mallory: User
) -> None:
    project_create(name="Private", owner=mallory)

    with pytest.raises(Conflict):
        project_get_or_create(name="Private", user=bob)
    assert not Membership.objects.filter(user=bob).exists()
