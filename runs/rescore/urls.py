"""Re-scoring a run."""

from __future__ import annotations

from django.urls import path

from runs.rescore import views

urlpatterns = [
    path("runs/<id:run_id>/rescore/", views.run_rescore, name="run_rescore"),
    path(
        "runs/<id:run_id>/scoring-passes/",
        views.run_scoring_passes,
        name="run_scoring_passes",
    ),
]
