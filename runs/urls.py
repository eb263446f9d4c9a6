from __future__ import annotations

from django.urls import path, register_converter

from runs import views
from runs.schemas import MAX_DB_INT


class IdConverter:
    """A database id: digits within the database's integer range, else 404."""

    regex = "[0-9]{1,19}"

    def to_python(self, value: str) -> int:
        number = int(value)
        if not 1 <= number <= MAX_DB_INT:
            raise ValueError(value)
        return number

    def to_url(self, value: int) -> str:
        return str(value)


register_converter(IdConverter, "id")

app_name = "runs"
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
    path("datasets/", views.dataset_list, name="dataset_list"),
    path("datasets/upload/", views.dataset_upload, name="dataset_upload"),
    path("datasets/<id:dataset_id>/", views.dataset_detail, name="dataset_detail"),
    path("targets/", views.target_list, name="target_list"),
]
