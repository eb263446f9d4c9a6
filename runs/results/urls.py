"""Pages of runs and their results."""

from __future__ import annotations

from runs.results import views
from runs.web.routes import page

urlpatterns = [
    page("", views.run_list),
    page("runs/new/", views.run_new),
    page("runs/<id:run_id>/", views.run_detail),
    page("runs/<id:run_id>/cancel/", views.run_cancel),
    page("runs/<id:run_id>/live-figures/", views.run_live_figures),
    page("runs/<id:run_id>/results/<id:result_id>/", views.result_detail),
    page("runs/<id:run_id>/export.<str:format>", views.run_export),
]
