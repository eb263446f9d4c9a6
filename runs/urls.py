from __future__ import annotations

from django.urls import path, register_converter

from runs import views, views_compare, views_projects, views_retry
from runs.schemas import MAX_DB_INT


class IdConverter:
    """A database id: digits within the database's integer range, else 404."""

    regex = "[0-9]{1,19}"

    def to_python(self, value: str) -> int:
        number = int(value)
        if not 1 <= number <= MAX_DB_INT:
            raise ValueError(value)
        return number

    def to_url(self, value: int) -> str:
        return str(value)


register_converter(IdConverter, "id")

app_name = "runs"
urlpatterns = [
    path("", views.run_list, name="run_list"),
    path("runs/new/", views.run_new, name="run_new"),
    path("runs/demo/", views.run_demo_start, name="run_demo_start"),
    path("runs/<id:run_id>/", views.run_detail, name="run_detail"),
    path("runs/<id:run_id>/cancel/", views.run_cancel, name="run_cancel"),
    path(
        "runs/<id:run_id>/results/<id:result_id>/",
        views.result_detail,
        name="result_detail",
    ),
    path("datasets/", views.dataset_list, name="dataset_list"),
    path("datasets/upload/", views.dataset_upload, name="dataset_upload"),
    path(
        "datasets/upload/<str:token>/",
        views.dataset_upload_map,
        name="dataset_upload_map",
    ),
    path("datasets/<id:dataset_id>/", views.dataset_detail, name="dataset_detail"),
    path("targets/", views.target_list, name="target_list"),
    path("targets/<id:target_id>/", views_projects.target_detail, name="target_detail"),
    path(
        "targets/<id:target_id>/delete/",
        views_projects.target_delete,
        name="target_delete",
    ),
    path("targets/<id:target_id>/try/", views_projects.target_try, name="target_try"),
    path("projects/", views_projects.project_list, name="project_list"),
    path(
        "projects/<id:project_id>/",
        views_projects.project_detail,
        name="project_detail",
    ),
    path(
        "projects/<id:project_id>/members/",
        views_projects.project_member_add,
        name="project_member_add",
    ),
    path(
        "projects/<id:project_id>/members/<id:user_id>/",
        views_projects.project_member_update,
        name="project_member_update",
    ),
    path(
        "projects/<id:project_id>/members/<id:user_id>/remove/",
        views_projects.project_member_remove,
        name="project_member_remove",
    ),
    path("account/keys/", views_projects.account_keys, name="account_keys"),
    path(
        "account/keys/<id:key_id>/revoke/",
        views_projects.account_key_revoke,
        name="account_key_revoke",
    ),
    path("catalogue/", views.catalogue, name="catalogue"),
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
    path("compare/", views_compare.compare, name="compare"),
    path(
        "compare/items.csv",
        views_compare.compare_items_csv,
        name="compare_items_csv",
    ),
    path(
        "runs/<id:run_id>/compare/",
        views_compare.run_compare_choices,
        name="run_compare_choices",
    ),
    path("runs/<id:run_id>/clusters/", views.run_clusters, name="run_clusters"),
    path(
        "runs/<id:run_id>/clusters/save/",
        views.run_cluster_save,
        name="run_cluster_save",
    ),
    path(
        "runs/<id:run_id>/export.<str:format>",
        views.run_export,
        name="run_export",
    ),
]
urlpatterns += [
    path("runs/<id:run_id>/retry/", views_retry.run_retry, name="run_retry"),
]

# Re-scoring a run.
from runs import views_rescore  # noqa: E402

urlpatterns += [
    path("runs/<id:run_id>/rescore/", views_rescore.run_rescore, name="run_rescore"),
    path(
        "runs/<id:run_id>/scoring-passes/",
        views_rescore.run_scoring_passes,
        name="run_scoring_passes",
    ),
]

# Tokens and cost.
from runs import views_cost  # noqa: E402

urlpatterns += [
    path("runs/<id:run_id>/resume/", views_cost.run_resume_view, name="run_resume"),
]
