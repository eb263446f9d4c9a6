"""A run's failure clusters."""

from __future__ import annotations

from runs.clusters import views
from runs.web.routes import page

urlpatterns = [
    page("runs/<id:run_id>/clusters/", views.run_clusters),
    page("runs/<id:run_id>/clusters/save/", views.run_cluster_save),
]
