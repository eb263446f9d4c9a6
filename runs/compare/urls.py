"""Comparing runs."""

from __future__ import annotations

from runs.compare import views
from runs.web.routes import page

urlpatterns = [
    page("compare/", views.compare),
    page("compare/items.csv", views.compare_items_csv),
    page("runs/<id:run_id>/compare/", views.run_compare_choices),
]
