"""Saved evaluations."""

from __future__ import annotations

from runs.evaluations import views
from runs.web.routes import page, pages

urlpatterns = [
    page("projects/<id:project_id>/evaluations/", views.evaluation_list),
    page("evaluations/new/", views.evaluation_new),
    *pages(
        "evaluations/<id:evaluation_id>/",
        {
            "": views.evaluation_detail,
            "edit/": views.evaluation_edit,
            "run/": views.evaluation_run_now,
            "sample/": views.evaluation_sample,
            "delete/": views.evaluation_delete,
            "schedules/": views.evaluation_schedule_add,
            "schedules/<id:schedule_id>/remove/": views.evaluation_schedule_remove,
        },
    ),
]
