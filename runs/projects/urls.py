"""Projects, their members and secrets, and a user's API keys."""

from __future__ import annotations

from runs.projects import views
from runs.web.routes import page, pages

urlpatterns = [
    page("projects/", views.project_list),
    *pages(
        "projects/<id:project_id>/",
        {
            "": views.project_detail,
            "members/": views.project_member_add,
            "members/<id:user_id>/": views.project_member_update,
            "members/<id:user_id>/remove/": views.project_member_remove,
        },
    ),
    page("account/keys/", views.account_keys),
    page("account/keys/<id:key_id>/revoke/", views.account_key_revoke),
    *pages(
        "projects/<id:project_id>/secrets/",
        {
            "": views.project_secrets,
            "<str:name>/delete/": views.project_secret_delete,
        },
    ),
]
