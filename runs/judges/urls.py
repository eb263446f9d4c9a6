"""LLM judges against people."""

from __future__ import annotations

from runs.judges import views
from runs.web.routes import page

urlpatterns = [
    page("runs/<id:run_id>/judges/", views.run_judges),
    page("runs/<id:run_id>/judges/thresholds/", views.run_judges_thresholds),
]
