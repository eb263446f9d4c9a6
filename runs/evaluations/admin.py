"""Saved evaluations in the admin: to read and to switch schedules on or off.

They are made and changed on the dashboard and through the API, where they
are checked and their history is written; the admin changes neither.
"""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from runs.models import Evaluation, EvaluationChange, Schedule, ScheduleTick
from runs.web.admin import NoAddAdmin


class ScheduleInline(admin.TabularInline):
    model = Schedule
    extra = 0
    fields = ["cron", "timezone", "enabled", "last_tick_at", "created_by"]
    readonly_fields = ["cron", "timezone", "last_tick_at", "created_by"]

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


class ChangeInline(admin.TabularInline):
    model = EvaluationChange
    extra = 0
    fields = ["at", "action", "user", "changes"]
    readonly_fields = ["at", "action", "user", "changes"]

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(Evaluation)
class EvaluationAdmin(NoAddAdmin):
    """Made on the dashboard or through the API, checked there."""

    list_display = ["name", "project", "dataset", "dataset_policy", "baseline_policy"]
    list_filter = ["project", "dataset_policy", "baseline_policy"]
    search_fields = ["name", "description"]
    list_select_related = ["project", "dataset"]
    # Its channels too: chosen where they are checked against its project.
    readonly_fields = [
        field.name for field in Evaluation._meta.fields if field.name != "id"
    ] + ["channels"]
    inlines = [ScheduleInline, ChangeInline]


@admin.register(ScheduleTick)
class ScheduleTickAdmin(NoAddAdmin):
    """The log of the schedules' ticks: written by the scheduler, never here."""

    list_display = ["tick_at", "schedule", "outcome", "missed", "run"]
    list_filter = ["outcome"]
    date_hierarchy = "tick_at"
    list_select_related = ["schedule", "run"]
    readonly_fields = [field.name for field in ScheduleTick._meta.fields]
