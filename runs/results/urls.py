"""Pages of runs and their results."""

from __future__ import annotations

from runs.results import views
from runs.web.routes import page, pages

urlpatterns = [
    page("", views.run_list),
    page("runs/new/", views.run_new),
    *pages(
        "runs/<id:run_id>/",
        {
            "": views.run_detail,
            "cancel/": views.run_cancel,
            "live-figures/": views.run_live_figures,
            "results/<id:result_id>/": views.result_detail,
            "export.<str:format>": views.run_export,
        },
    ),
]
