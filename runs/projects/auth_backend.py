"""Django's ModelBackend, with the user of a signed-in request read in one plain
statement (runs/records/reads.py): every page reads it, and the ORM took longer to
build that query than the database took to run it.

Nothing else changes: the user is read on every request (no cache), so
``django.contrib.auth.get_user`` still compares the session's hash with the
user's password hash each time, and a deactivated user (refused here, as
ModelBackend refuses it) or a changed password ends every session at once.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.backends import ModelBackend

from runs.records import reads


class UserBackend(ModelBackend):
    def get_user(self, user_id: Any) -> Any | None:
        user = reads.user_by_id(user_id)
        if user is None or not self.user_can_authenticate(user):
            return None
        return user
