"""Ranking runs."""

from __future__ import annotations

from runs.leaderboard import views
from runs.web.routes import page

urlpatterns = [
    page("leaderboard/", views.leaderboard),
]
