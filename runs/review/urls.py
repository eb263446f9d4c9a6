"""Human review."""

from __future__ import annotations

from runs.review import views
from runs.web.routes import page

urlpatterns = [
    page("review/", views.review_queue_list),
    page("review/<int:queue_id>/", views.review_next),
    page("review/<int:queue_id>/labels/<int:label_id>/", views.review_label),
]
