"""The demo run's start."""

from __future__ import annotations

from runs.demo import views
from runs.web.routes import page

urlpatterns = [
    page("runs/demo/", views.run_demo_start),
]
