"""Retrying and resuming a run."""

from __future__ import annotations

from django.urls import path

from runs.retry import views

urlpatterns = [
    path("runs/<id:run_id>/retry/", views.run_retry, name="run_retry"),
    path("runs/<id:run_id>/resume/", views.run_resume_view, name="run_resume"),
]
