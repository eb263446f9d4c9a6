"""Human review."""

from __future__ import annotations

from runs.review import views
from runs.web.routes import page, pages

urlpatterns = [
    page("review/", views.review_queue_list),
    page("review/new/", views.review_queue_new),
    *pages(
        "review/<int:queue_id>/",
        {
            "": views.review_next,
            "labels/<int:label_id>/": views.review_label,
            "agreement/": views.review_agreement,
            "items/<int:item_id>/adjudicate/": views.review_adjudicate,
            "dataset/": views.review_save_dataset,
        },
    ),
]
