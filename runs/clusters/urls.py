"""A run's failure clusters."""

from __future__ import annotations

from django.urls import path

from runs.clusters import views

urlpatterns = [
    path("runs/<id:run_id>/clusters/", views.run_clusters, name="run_clusters"),
    path(
        "runs/<id:run_id>/clusters/save/",
        views.run_cluster_save,
        name="run_cluster_save",
    ),
]
