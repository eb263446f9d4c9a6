"""Dataset pages: the list, one dataset, upload and mapping."""

from __future__ import annotations

from runs.datasets import views
from runs.web.routes import page

urlpatterns = [
    page("datasets/", views.dataset_list),
    page("datasets/upload/", views.dataset_upload),
    page("datasets/upload/<str:token>/", views.dataset_upload_map),
    page("datasets/<id:dataset_id>/", views.dataset_detail),
]
