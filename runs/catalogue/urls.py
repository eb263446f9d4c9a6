"""The catalogue of plug-ins."""

from __future__ import annotations

from django.urls import path

from runs.catalogue import views

urlpatterns = [
    path("catalogue/", views.catalogue, name="catalogue"),
]
