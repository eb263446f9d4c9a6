from __future__ import annotations

from django.urls import path

from runs import views

app_name = "runs"
urlpatterns = [
    path("", views.run_list, name="run_list"),
    path("runs/new/", views.run_new, name="run_new"),
    path("runs/<int:run_id>/", views.run_detail, name="run_detail"),
    path("runs/<int:run_id>/cancel/", views.run_cancel, name="run_cancel"),
    path(
        "runs/<int:run_id>/results/<int:result_id>/",
        views.result_detail,
        name="result_detail",
    ),
    path("datasets/", views.dataset_list, name="dataset_list"),
    path("datasets/upload/", views.dataset_upload, name="dataset_upload"),
    path(
        "datasets/upload/<str:token>/",
        views.dataset_upload_map,
        name="dataset_upload_map",
    ),
    path("datasets/<int:dataset_id>/", views.dataset_detail, name="dataset_detail"),
    path("targets/", views.target_list, name="target_list"),
]
