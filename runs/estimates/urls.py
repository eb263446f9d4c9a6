"""The new-run form's estimate."""

from __future__ import annotations

from runs.estimates import views
from runs.web.routes import page

urlpatterns = [
    page("runs/estimate/", views.run_estimate_fragment),
]
