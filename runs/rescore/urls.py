"""Re-scoring a run."""

from __future__ import annotations

from runs.rescore import views
from runs.web.routes import page

urlpatterns = [
    page("runs/<id:run_id>/rescore/", views.run_rescore),
    page("runs/<id:run_id>/scoring-passes/", views.run_scoring_passes),
]
