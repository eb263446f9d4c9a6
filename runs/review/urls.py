"""Human review."""

from __future__ import annotations

from runs.review import views
from runs.web.routes import page

urlpatterns = [
    page("review/", views.review_queue_list),
    page("review/new/", views.review_queue_new),
    page("review/<int:queue_id>/", views.review_next),
    page("review/<int:queue_id>/labels/<int:label_id>/", views.review_label),
    page("review/<int:queue_id>/agreement/", views.review_agreement),
    page(
        "review/<int:queue_id>/items/<int:item_id>/adjudicate/",
        views.review_adjudicate,
    ),
    page("review/<int:queue_id>/dataset/", views.review_save_dataset),
]
