from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import Model, QuerySet
from django.forms import BaseFormSet, ModelForm
from django.http import HttpRequest

from runs.alerts import admin as alerts_admin  # noqa: F401  (registers its models)

# Each capability with an admin of its own; registered on import.
from runs.evaluations import admin as evaluations_admin  # noqa: F401
from runs.models import (
    RUN_COUNTS,
    ApiKey,
    Dataset,
    Item,
    Membership,
    ModelPrice,
    Project,
    ProjectSecret,
    Result,
    Run,
    Score,
    ScoringPass,
    Step,
    Target,
)
from runs.records.versions import results_changed, runs_results_changed
from runs.results.services import run_cancel
from runs.review import admin as review_admin  # noqa: F401  (registration)
from runs.web.admin import NoAddAdmin, ReadOnlyAdmin, ReadOnlyInline


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    autocomplete_fields = ["user"]


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin):
    list_display = ["name", "created_at"]
    search_fields = ["name", "description"]
    inlines = [MembershipInline]


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["user", "project", "role", "created_at"]
    list_filter = ["role", "project"]
    search_fields = ["user__username", "project__name"]
    autocomplete_fields = ["user", "project"]


@admin.register(Dataset)
class DatasetAdmin(admin.ModelAdmin):
    list_display = [
        "name",
        "version",
        "project",
        "item_count",
        "source_format",
        "created_at",
    ]
    list_filter = ["project", "source_format"]
    search_fields = ["name", "content_hash", "description"]
    readonly_fields = [
        "project",
        "name",
        "version",
        "content_hash",
        "item_count",
        "source_format",
        "source_name",
        "created_by",
        "created_at",
    ]


@admin.register(Item)
class ItemAdmin(admin.ModelAdmin):
    list_display = ["external_id", "index", "dataset"]
    list_filter = ["dataset__project"]
    search_fields = ["external_id", "dataset__name"]
    readonly_fields = [
        "dataset",
        "index",
        "external_id",
        "input",
        "expected",
        "metadata",
    ]
    list_select_related = ["dataset"]


@admin.register(Target)
class TargetAdmin(admin.ModelAdmin):
    list_display = ["name", "kind", "project", "created_at"]
    list_filter = ["kind", "project"]
    search_fields = ["name"]
    readonly_fields = ["created_by", "created_at"]


@admin.action(description="Cancel selected runs")
def cancel_runs(
    modeladmin: RunAdmin, request: HttpRequest, queryset: QuerySet[Run]
) -> None:
    count = 0
    for run in queryset:
        if not run.is_final:
            run_cancel(run=run)
            count += 1
    modeladmin.message_user(
        request, f"Asked {count} run(s) to cancel.", messages.SUCCESS
    )


@admin.register(Run)
class RunAdmin(NoAddAdmin):
    """Runs are started from the dashboard, the API or evalrun."""

    list_display = [
        "id",
        "name",
        "project",
        "dataset",
        "target_name",
        "status",
        *RUN_COUNTS,
        "created_at",
    ]
    list_filter = ["status", "project", "target_kind"]
    search_fields = ["name", "target_name", "dataset__name", "error"]
    date_hierarchy = "created_at"
    actions = [cancel_runs]
    list_select_related = ["project", "dataset"]
    readonly_fields = [
        "project",
        "dataset",
        "dataset_hash",
        "target",
        "target_name",
        "target_kind",
        "target_config",
        "scorers",
        "options",
        "parent",
        "status",
        "cancel_requested",
        "error",
        *RUN_COUNTS,
        "prompt_tokens",
        "completion_tokens",
        "cost",
        "unpriced",
        "prices",
        "created_by",
        "created_at",
        "started_at",
        "finished_at",
        "heartbeat_at",
        "executor_id",
        "evaluation",
        "schedule",
        "evaluation_trigger",
        "evaluation_end",
    ]


class ScoreInline(ReadOnlyInline):
    model = Score
    readonly_fields = ["scorer", "value", "passed", "reason", "error"]


class ResultsWriterAdmin(NoAddAdmin):
    """The admin of rows a run's results are made of: whatever it saves or
    deletes moves the run's ``results_version`` (records/versions.py), so
    nothing cached from the old rows (a summary kept for a day) is served."""

    # The path from the admin's model to its run's id.
    run_path = "run_id"

    def _run_id(self, obj: Model) -> int:
        rows = type(obj)._default_manager.filter(pk=obj.pk)
        run_id: int = rows.values_list(self.run_path, flat=True)[0]
        return run_id

    # Called after save_model on every add or change, with the inlines saved.
    def save_related(
        self,
        request: HttpRequest,
        form: ModelForm,
        formsets: list[BaseFormSet],
        change: bool,
    ) -> None:
        super().save_related(request, form, formsets, change)
        results_changed(self._run_id(form.instance))

    def delete_model(self, request: HttpRequest, obj: Model) -> None:
        run_id = self._run_id(obj)
        super().delete_model(request, obj)
        results_changed(run_id)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet) -> None:
        run_ids = list(queryset.values_list(self.run_path, flat=True).distinct())
        super().delete_queryset(request, queryset)
        runs_results_changed(run_ids)


@admin.register(Result)
class ResultAdmin(ResultsWriterAdmin):
    list_display = ["run", "item_index", "epoch", "status", "error_kind", "latency_ms"]
    list_filter = ["status", "error_kind"]
    search_fields = ["item__external_id", "error_message", "error_signature"]
    list_select_related = ["run", "item"]
    inlines = [ScoreInline]
    readonly_fields = [f.name for f in Result._meta.fields]


@admin.register(Score)
class ScoreAdmin(ResultsWriterAdmin):
    run_path = "result__run_id"

    list_display = ["result", "scorer", "value", "passed", "error"]
    list_filter = ["scorer", "passed"]
    search_fields = ["scorer", "reason", "error"]
    readonly_fields = ["result", "scorer", "value", "passed", "reason", "error"]


@admin.register(ApiKey)
class ApiKeyAdmin(NoAddAdmin):
    """Keys are shown once: create them with create_api_key."""

    # The list shows every field the change page does.
    list_display = fields = (
        "name",
        "user",
        "prefix",
        "created_at",
        "last_used_at",
        "revoked_at",
    )
    list_filter = ["revoked_at"]
    search_fields = ["name", "user__username", "prefix"]
    # Only the prefix identifies a key here; its hash is never shown.
    readonly_fields = ["user", "prefix", "created_at", "last_used_at"]


@admin.register(ProjectSecret)
class ProjectSecretAdmin(ReadOnlyAdmin):
    """Names only: values are set by project admins on the dashboard or the API,
    and neither the value nor its ciphertext is ever shown here."""

    list_display = ["name", "project", "hosts", "updated_at", "updated_by"]
    list_filter = ["project"]
    search_fields = ["name", "project__name"]
    fields = readonly_fields = (
        "project",
        "name",
        "hosts",
        "created_at",
        "created_by",
        "updated_at",
        "updated_by",
    )

    def get_queryset(self, request: HttpRequest) -> QuerySet[ProjectSecret]:
        return super().get_queryset(request).defer("ciphertext")


# -- scoring passes ---------------------------------------------------------------


@admin.register(ScoringPass)
class ScoringPassAdmin(NoAddAdmin):
    """The log of a run's scoring passes: written by re-scores, never here."""

    list_display = ["run", "initial", "status", "scored", "total", "errored", "user"]
    list_filter = ["status", "initial"]
    search_fields = ["run__name", "error"]
    list_select_related = ["run", "user"]
    readonly_fields = [f.name for f in ScoringPass._meta.fields]


# -- tokens and cost -------------------------------------------------------------


@admin.register(ModelPrice)
class ModelPriceAdmin(admin.ModelAdmin):
    """Prices of models' tokens; a row replaces the entry of the same name in
    EVALSITE_PRICES. A run keeps the prices of its first start."""

    list_display = [
        "model",
        "prompt_per_million",
        "completion_per_million",
        "currency",
        "note",
        "updated_at",
    ]
    search_fields = ["model", "note"]
    fields = ["model", "prompt_per_million", "completion_per_million", "note"]


@admin.register(Step)
class StepAdmin(ReadOnlyAdmin):
    """A result's trajectory, read only: steps are written with their result
    by the executor and replaced with it."""

    list_display = ["result", "index", "kind", "name", "error_type", "latency_ms"]
    list_filter = ["kind"]
    search_fields = ["name", "call_hash", "error"]
    list_select_related = ["result"]
    raw_id_fields = ["result"]
    readonly_fields = [f.name for f in Step._meta.fields]

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False
