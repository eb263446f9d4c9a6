"""Comparing runs."""

from __future__ import annotations

from django.urls import path

from runs.compare import views

urlpatterns = [
    path("compare/", views.compare, name="compare"),
    path("compare/items.csv", views.compare_items_csv, name="compare_items_csv"),
    path(
        "runs/<id:run_id>/compare/",
        views.run_compare_choices,
        name="run_compare_choices",
    ),
]
