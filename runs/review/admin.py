"""The admin's view of human review: queues, labels and their history.

Queues are made through the API (which checks their source and rubric);
here they are read, their reviewers and flags changed, or deleted, which
also takes their scores off the run. Labels, their history and the
adjudications of disputed items are read only.
"""

from __future__ import annotations

from django.contrib import admin
from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpRequest

from runs.models import ReviewAdjudication, ReviewLabel, ReviewLabelChange, ReviewQueue
from runs.review.scores import scorer_detach
from runs.web.admin import NoAddAdmin, ReadOnlyInline


@admin.register(ReviewQueue)
class ReviewQueueAdmin(NoAddAdmin):
    list_display = ["name", "project", "source", "run", "raters", "blind", "created_at"]
    list_filter = ["source", "blind", "open_pool", "project"]
    search_fields = ["name", "description"]
    list_select_related = ["project", "run"]
    autocomplete_fields = ["reviewers"]
    readonly_fields = [
        "project",
        "name",
        "source",
        "source_params",
        "run",
        "other_run",
        "rubric",
        "raters",
        "created_by",
        "created_at",
    ]

    def delete_model(self, request: HttpRequest, obj: ReviewQueue) -> None:
        with transaction.atomic():
            scorer_detach(queue=obj)
            super().delete_model(request, obj)

    def delete_queryset(
        self, request: HttpRequest, queryset: QuerySet[ReviewQueue]
    ) -> None:
        with transaction.atomic():
            for queue in queryset:
                scorer_detach(queue=queue)
            super().delete_queryset(request, queryset)


class ReviewLabelChangeInline(ReadOnlyInline):
    model = ReviewLabelChange
    readonly_fields = ["user", "changed_at", "value", "criteria", "note"]


@admin.register(ReviewLabel)
class ReviewLabelAdmin(NoAddAdmin):
    list_display = ["queue", "review_item", "reviewer", "value", "submitted_at"]
    list_filter = ["queue"]
    search_fields = ["reviewer__username", "queue__name", "note"]
    list_select_related = ["queue", "review_item", "reviewer"]
    readonly_fields = [f.name for f in ReviewLabel._meta.fields]
    inlines = [ReviewLabelChangeInline]


@admin.register(ReviewAdjudication)
class ReviewAdjudicationAdmin(NoAddAdmin):
    list_display = ["review_item", "user", "value", "changed_at"]
    search_fields = ["user__username", "note"]
    list_select_related = ["review_item", "user"]
    # The item first, then the label (fields of the abstract LabelRecord come
    # first in _meta).
    readonly_fields = [
        "id",
        "review_item",
        "user",
        "changed_at",
        "value",
        "criteria",
        "note",
    ]
