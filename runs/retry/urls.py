"""Retrying and resuming a run."""

from __future__ import annotations

from runs.retry import views
from runs.web.routes import page

urlpatterns = [
    page("runs/<id:run_id>/retry/", views.run_retry),
    page("runs/<id:run_id>/resume/", views.run_resume_view, name="run_resume"),
]
