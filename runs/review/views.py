"""The review pages: the queues, and a reviewer's keyboard-first page of one item."""

from __future__ import annotations

import json

from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET

from runs.review import selectors, services
from runs.web.requests import AuthedRequest


@require_GET
def review_queue_list(request: AuthedRequest) -> HttpResponse:
    queues = list(selectors.queue_list(user=request.user))
    rows = [
        (
            queue,
            selectors.queue_progress(queue=queue, user=request.user),
            services.may_review(request.user, queue),
        )
        for queue in queues
    ]
    return render(request, "runs/review/queue_list.html", {"rows": rows})


@require_GET
def review_next(request: AuthedRequest, queue_id: int) -> HttpResponse:
    """Hand the reviewer their next item (a GET a link or a key can follow:
    taking an item changes nothing a second request would not find again)."""
    queue = selectors.queue_get(user=request.user, queue_id=queue_id)
    label = services.label_next(user=request.user, queue=queue)
    if label is None:
        progress = selectors.queue_progress(queue=queue, user=request.user)
        context = {"queue": queue, "progress": progress}
        return render(request, "runs/review/done.html", context)
    return redirect("runs:review_label", queue_id=queue.pk, label_id=label.pk)


@require_GET
def review_label(request: AuthedRequest, queue_id: int, label_id: int) -> HttpResponse:
    queue = selectors.queue_get(user=request.user, queue_id=queue_id)
    label = selectors.label_get(user=request.user, queue=queue, label_id=label_id)
    page = selectors.review_page(queue=queue, label=label)
    overall = "Overall" if queue.rubric["criteria"] else "Label"
    fields = [("", overall, json.dumps(selectors.shown_value(queue, label)))]
    fields += [
        (name, name, json.dumps(label.criteria.get(name)))
        for name in queue.rubric["criteria"]
    ]
    context = {"page": page, "fields": fields}
    return render(request, "runs/review/review.html", context)
