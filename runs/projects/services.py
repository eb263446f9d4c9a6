"""Writes to projects, memberships and API keys."""

from __future__ import annotations

import hashlib
import secrets

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from runs.access import Action, require, visible_projects
from runs.errors import Conflict, InvalidInput, NotFound
from runs.models import (
    ApiKey,
    Membership,
    Project,
)
from runs.projects.key_usage import key_usage_note
from runs.records import reads
from runs.records.names import clean_name

API_KEY_PREFIX = "evk_"


def project_create(
    *, name: str, owner: AbstractBaseUser, description: str = ""
) -> Project:
    """Create a project with ``owner`` as its admin."""
    name = clean_name(name, model=Project)
    with transaction.atomic():
        project, created = Project.objects.get_or_create(
            name=name, defaults={"description": description}
        )
        if not created:
            raise Conflict(f"a project named {name!r} exists")
        Membership.objects.create(
            project=project, user=owner, role=Membership.Role.ADMIN
        )
    return project


def project_get_or_create(*, name: str, user: AbstractBaseUser) -> Project:
    """The user's project called ``name``, or a new one with the user as admin.

    Only the user's own projects are looked at: a project of that name that
    the user is not a member of is a conflict, never joined.
    """
    name = name.strip()
    project = visible_projects(user).filter(name=name).first()
    if project is not None:
        return project
    return project_create(name=name, owner=user)


def api_key_create(*, user: AbstractBaseUser, name: str) -> tuple[ApiKey, str]:
    """Create an API key; the plain key is returned once and never stored."""
    name = clean_name(name, model=ApiKey, required=False)
    secret = secrets.token_urlsafe(32)
    prefix = secrets.token_hex(4)
    plain = f"{API_KEY_PREFIX}{prefix}_{secret}"
    key = ApiKey.objects.create(
        user=user,
        name=name or "default",
        prefix=prefix,
        key_hash=api_key_hash(plain),
    )
    return key, plain


def api_key_hash(plain: str) -> str:
    # Keys carry 256 bits of randomness, so one round of SHA-256 suffices.
    return hashlib.sha256(plain.encode()).hexdigest()


def api_key_authenticate(plain: str, *, note_use: bool = True) -> ApiKey | None:
    """The active key matching ``plain``, with its user, or None."""
    parts = plain.removeprefix(API_KEY_PREFIX).split("_", 1)
    if not plain.startswith(API_KEY_PREFIX) or len(parts) != 2:
        return None
    key = reads.api_key_with_user(parts[0])
    if key is None or not secrets.compare_digest(key.key_hash, api_key_hash(plain)):
        return None
    if note_use:
        key_usage_note(key)
    return key


def _role_checked(role: str) -> str:
    if role not in Membership.Role.values:
        known = ", ".join(Membership.Role.values)
        raise InvalidInput(f"must be one of {known}, not {role!r}", field="role")
    return role


def _project_locked(
    project: Project, actor: AbstractBaseUser, action: Action
) -> Project:
    """Lock the project's row and check the actor may do ``action`` under the lock.

    Every change of a project's members takes this lock first, so two admins
    demoting each other at once cannot leave the project without one, and an
    admin demoted a moment ago can no longer act as one.
    """
    locked = Project.objects.select_for_update().filter(pk=project.pk).first()
    if locked is None:
        raise NotFound("no such project")
    require(actor, locked, action)
    return locked


def _member_of(project: Project, user_id: int) -> Membership:
    # Through the user's key, whose lookup treats an id beyond the column's
    # range as matching nothing (user_id= would overflow on SQLite).
    membership = (
        Membership.objects.select_related("user")
        .filter(project=project, user__pk=user_id)
        .first()
    )
    if membership is None:
        raise NotFound(f"user {user_id} is not a member of {project}")
    return membership


def _admins_besides(project: Project, membership: Membership) -> bool:
    return (
        Membership.objects.filter(project=project, role=Membership.Role.ADMIN)
        .exclude(pk=membership.pk)
        .exists()
    )


def _user_by_username_or_email(identifier: str) -> AbstractBaseUser:
    identifier = identifier.strip()
    if not identifier:
        raise InvalidInput("is required: a username or an email address", field="user")
    users = get_user_model().objects.filter(is_active=True)
    user = users.filter(username=identifier).first()
    if user is not None:
        return user
    matches = list(users.filter(email__iexact=identifier)[:2])
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise InvalidInput(
            "several users have this email address; give the username", field="user"
        )
    raise InvalidInput(f"no user {identifier!r}: invite an existing user", field="user")


def membership_add(
    *,
    project: Project,
    actor: AbstractBaseUser,
    user: str,
    role: str = Membership.Role.EDITOR,
) -> Membership:
    """Add an existing user (by username or email) to a project; admins only."""
    with transaction.atomic():
        project = _project_locked(project, actor, Action.MANAGE)
        role = _role_checked(role)
        invitee = _user_by_username_or_email(user)
        membership, created = Membership.objects.get_or_create(
            project=project, user=invitee, defaults={"role": role}
        )
    if not created:
        raise Conflict(f"{invitee.get_username()} is already a member of {project}")
    return membership


def membership_update(
    *, project: Project, actor: AbstractBaseUser, user_id: int, role: str
) -> Membership:
    """Change a member's role; admins only, and never the last admin's."""
    with transaction.atomic():
        project = _project_locked(project, actor, Action.MANAGE)
        role = _role_checked(role)
        membership = _member_of(project, user_id)
        if (
            membership.role == Membership.Role.ADMIN
            and role != Membership.Role.ADMIN
            and not _admins_besides(project, membership)
        ):
            raise InvalidInput(
                f"{membership.user.get_username()} is the last admin of {project}; "
                "make another member admin first",
                field="role",
            )
        membership.role = role
        membership.save(update_fields=["role"])
    return membership


def membership_remove(
    *, project: Project, actor: AbstractBaseUser, user_id: int
) -> None:
    """Remove a member (admins), or leave a project (any member); never the last
    admin."""
    # Anyone may leave; only an admin removes someone else.
    action = Action.VIEW if actor.pk == user_id else Action.MANAGE
    with transaction.atomic():
        project = _project_locked(project, actor, action)
        membership = _member_of(project, user_id)
        if membership.role == Membership.Role.ADMIN and not _admins_besides(
            project, membership
        ):
            raise InvalidInput(
                f"{membership.user.get_username()} is the last admin of {project}; "
                "make another member admin first",
                field="user",
            )
        membership.delete()


def api_key_revoke(*, user: AbstractBaseUser, key_id: int) -> ApiKey:
    """Revoke one of the user's own keys; it stops working at once."""
    with transaction.atomic():
        key = ApiKey.objects.select_for_update().filter(user=user, pk=key_id).first()
        if key is None:
            raise NotFound(f"no API key {key_id}")
        if key.revoked_at is None:
            key.revoked_at = timezone.now()
            key.save(update_fields=["revoked_at"])
    return key
