"""What the admin's declarations share."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest


class ReadOnlyInline(admin.TabularInline):
    """Rows listed under the row they belong to, to read: the services write
    them (a result's scores, a label's history), so none is added or deleted
    here."""

    extra = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


class NoAddAdmin(admin.ModelAdmin):
    """Rows the dashboard, the API or a command makes, with the checks and
    records that go with them: the admin never adds one."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


class ReadOnlyAdmin(NoAddAdmin):
    """Rows to read: neither added nor changed here."""

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False
