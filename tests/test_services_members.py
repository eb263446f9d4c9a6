"""Member services under concurrency: a project never loses its last admin."""

from __future__ import annotations

import threading
import time

import pytest
from django.contrib.auth.models import User
from django.db import connection, transaction

from runs.errors import DomainError
from runs.models import Membership, Project
from runs.projects.services import membership_update


@pytest.mark.django_db(transaction=True)
def test_two_admins_demoting_each_other_at_once_leave_one_admin(
    project: Project, alice: User, bob: User
) -> None:
    Membership.objects.filter(project=project, user=bob).update(role="admin")
    second_started = threading.Event()
    outcomes: dict[str, str] = {}

    def bob_demotes_alice() -> None:
        try:
            second_started.set()
            membership_update(
                project=project, actor=bob, user_id=alice.pk, role="editor"
            )
            outcomes["bob"] = "done"
        except DomainError as exc:
            outcomes["bob"] = type(exc).__name__
        finally:
            connection.close()

    other = threading.Thread(target=bob_demotes_alice)
    with transaction.atomic():
        # Alice's demotion of bob is written but not yet committed while
        # bob's request arrives.
        membership_update(project=project, actor=alice, user_id=bob.pk, role="editor")
        other.start()
        second_started.wait(5)
        time.sleep(0.3)  # room for bob's request to reach the database
    other.join(10)

    roles = dict(project.memberships.values_list("user__username", "role"))
    assert roles["alice"] == "admin" and roles["bob"] == "editor"
    assert outcomes["bob"] in {"Forbidden", "InvalidInput"}
