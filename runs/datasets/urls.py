"""Dataset pages: the list, one dataset, upload and mapping."""

from __future__ import annotations

from django.urls import path

from runs.datasets import views

urlpatterns = [
    path("datasets/", views.dataset_list, name="dataset_list"),
    path("datasets/upload/", views.dataset_upload, name="dataset_upload"),
    path(
        "datasets/upload/<str:token>/",
        views.dataset_upload_map,
        name="dataset_upload_map",
    ),
    path("datasets/<id:dataset_id>/", views.dataset_detail, name="dataset_detail"),
]
