"""Projects are created only with their creator as admin, and read within
the access policy."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from runs.access import Action
from runs.errors import Conflict, Forbidden, NotFound
from runs.models import Membership, Project
from runs.projects.selectors import project_get
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


def test_project_get_for_an_action_refuses_a_member_below_its_role(
    project: Project, bob: User, victor: User, mallory: User
) -> None:
    assert project_get(user=victor, project_id=project.pk) == project
    assert project_get(user=bob, project_id=project.pk, action=Action.EDIT) == project
    with pytest.raises(Forbidden):
        project_get(user=victor, project_id=project.pk, action=Action.EDIT)
    with pytest.raises(Forbidden):
        project_get(user=bob, project_id=project.pk, action=Action.MANAGE)
    with pytest.raises(NotFound):
        project_get(user=mallory, project_id=project.pk, action=Action.EDIT)
