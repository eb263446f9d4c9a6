"""Target pages: the list, one target, its deletion and a try."""

from __future__ import annotations

from runs.targets import views
from runs.web.routes import page

urlpatterns = [
    page("targets/", views.target_list),
    page("targets/<id:target_id>/", views.target_detail),
    page("targets/<id:target_id>/delete/", views.target_delete),
    page("targets/<id:target_id>/try/", views.target_try),
]
