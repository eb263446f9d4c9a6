"""Pages of runs and their results."""

from __future__ import annotations

from django.urls import path

from runs.results import views

urlpatterns = [
    path("", views.run_list, name="run_list"),
    path("runs/new/", views.run_new, name="run_new"),
    path("runs/<id:run_id>/", views.run_detail, name="run_detail"),
    path("runs/<id:run_id>/cancel/", views.run_cancel, name="run_cancel"),
    path(
        "runs/<id:run_id>/results/<id:result_id>/",
        views.result_detail,
        name="result_detail",
    ),
    path("runs/<id:run_id>/export.<str:format>", views.run_export, name="run_export"),
]
