"""Projects, their members and secrets, and a user's API keys."""

from __future__ import annotations

from django.urls import path

from runs.projects import views

urlpatterns = [
    path("projects/", views.project_list, name="project_list"),
    path("projects/<id:project_id>/", views.project_detail, name="project_detail"),
    path(
        "projects/<id:project_id>/members/",
        views.project_member_add,
        name="project_member_add",
    ),
    path(
        "projects/<id:project_id>/members/<id:user_id>/",
        views.project_member_update,
        name="project_member_update",
    ),
    path(
        "projects/<id:project_id>/members/<id:user_id>/remove/",
        views.project_member_remove,
        name="project_member_remove",
    ),
    path("account/keys/", views.account_keys, name="account_keys"),
    path(
        "account/keys/<id:key_id>/revoke/",
        views.account_key_revoke,
        name="account_key_revoke",
    ),
    path(
        "projects/<id:project_id>/secrets/",
        views.project_secrets,
        name="project_secrets",
    ),
    path(
        "projects/<id:project_id>/secrets/<str:name>/delete/",
        views.project_secret_delete,
        name="project_secret_delete",
    ),
]
