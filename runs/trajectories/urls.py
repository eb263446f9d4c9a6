"""Trajectories: one item's, across runs."""

from __future__ import annotations

from runs.trajectories import views
from runs.web.routes import page

urlpatterns = [
    page("trajectories/diff/", views.trajectory_diff_page, name="trajectory_diff"),
]
