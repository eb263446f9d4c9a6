"""The demo run's start."""

from __future__ import annotations

from django.urls import path

from runs.demo import views

urlpatterns = [
    path("runs/demo/", views.run_demo_start, name="run_demo_start"),
]
