"""Pages of alert channels."""

from __future__ import annotations

from runs.alerts import views
from runs.web.routes import page

urlpatterns = [
    page("projects/<id:project_id>/alerts/", views.channel_list),
    page("alerts/<id:channel_id>/", views.channel_detail),
    page("alerts/<id:channel_id>/test/", views.channel_test),
    page("alerts/<id:channel_id>/secret/", views.channel_secret),
    page("alerts/<id:channel_id>/delete/", views.channel_delete),
]
