"""Target pages: the list, one target, its deletion and a try."""

from __future__ import annotations

from django.urls import path

from runs.targets import views

urlpatterns = [
    path("targets/", views.target_list, name="target_list"),
    path("targets/<id:target_id>/", views.target_detail, name="target_detail"),
    path("targets/<id:target_id>/delete/", views.target_delete, name="target_delete"),
    path("targets/<id:target_id>/try/", views.target_try, name="target_try"),
]
