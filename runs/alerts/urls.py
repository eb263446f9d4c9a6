"""Pages of alert channels."""

from __future__ import annotations

from runs.alerts import views
from runs.web.routes import page, pages

urlpatterns = [
    page("projects/<id:project_id>/alerts/", views.channel_list),
    *pages(
        "alerts/<id:channel_id>/",
        {
            "": views.channel_detail,
            "test/": views.channel_test,
            "secret/": views.channel_secret,
            "delete/": views.channel_delete,
        },
    ),
]
