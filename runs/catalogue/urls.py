"""The catalogue of plug-ins."""

from __future__ import annotations

from runs.catalogue import views
from runs.web.routes import page

urlpatterns = [
    page("catalogue/", views.catalogue),
]
