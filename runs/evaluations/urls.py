"""Saved evaluations."""

from __future__ import annotations

from runs.evaluations import views
from runs.web.routes import page

urlpatterns = [
    page("projects/<id:project_id>/evaluations/", views.evaluation_list),
    page("evaluations/new/", views.evaluation_new),
    page("evaluations/<id:evaluation_id>/", views.evaluation_detail),
    page("evaluations/<id:evaluation_id>/edit/", views.evaluation_edit),
    page("evaluations/<id:evaluation_id>/run/", views.evaluation_run_now),
    page("evaluations/<id:evaluation_id>/sample/", views.evaluation_sample),
    page("evaluations/<id:evaluation_id>/delete/", views.evaluation_delete),
    page("evaluations/<id:evaluation_id>/schedules/", views.evaluation_schedule_add),
    page(
        "evaluations/<id:evaluation_id>/schedules/<id:schedule_id>/remove/",
        views.evaluation_schedule_remove,
    ),
]
