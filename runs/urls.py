from __future__ import annotations

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.contrib.staticfiles.views import serve
from django.urls import path, re_path
from django.views.decorators.cache import cache_control

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
    path("datasets/<int:dataset_id>/", views.dataset_detail, name="dataset_detail"),
    path("targets/", views.target_list, name="target_list"),
]

# Daphne serves no files of its own. The dashboard's static files are few and
# small (htmx, its ws extension, one stylesheet), so in the embedded mode the
# app serves them itself, also to the login page (hence login_not_required).
if settings.DEBUG:
    static_prefix = settings.STATIC_URL.lstrip("/")
    urlpatterns += [
        re_path(
            rf"^{static_prefix}(?P<path>.*)$",
            login_not_required(cache_control(max_age=300)(serve)),
            name="static",
        )
    ]
