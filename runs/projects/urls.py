"""Projects, their members and secrets, and a user's API keys."""

from __future__ import annotations

from runs.projects import views
from runs.web.routes import page

urlpatterns = [
    page("projects/", views.project_list),
    page("projects/<id:project_id>/", views.project_detail),
    page("projects/<id:project_id>/members/", views.project_member_add),
    page("projects/<id:project_id>/members/<id:user_id>/", views.project_member_update),
    page(
        "projects/<id:project_id>/members/<id:user_id>/remove/",
        views.project_member_remove,
    ),
    page("account/keys/", views.account_keys),
    page("account/keys/<id:key_id>/revoke/", views.account_key_revoke),
    page("projects/<id:project_id>/secrets/", views.project_secrets),
    page(
        "projects/<id:project_id>/secrets/<str:name>/delete/",
        views.project_secret_delete,
    ),
]
