"""The review pages: the queues, and a reviewer's keyboard-first page of one item."""

from __future__ import annotations

import json
from typing import Any

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from runs.access import Action, can, require
from runs.errors import Conflict, InvalidInput
from runs.models import ReviewQueue, ReviewSource, RubricKind
from runs.results.selectors import run_get
from runs.review import adjudication, selectors, services
from runs.review.agreement import queue_agreement
from runs.review.export import queue_dataset_create
from runs.review.forms import QueueForm
from runs.web.forms import add_domain_error
from runs.web.requests import AuthedRequest


@require_GET
def review_queue_list(request: AuthedRequest) -> HttpResponse:
    queues = list(selectors.queue_list(user=request.user))
    rows = [
        (
            queue,
            selectors.queue_progress(queue=queue, user=request.user),
            services.may_review(request.user, queue),
            can(request.user, queue.project, Action.EDIT),
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


def adjudication_choices(queue: ReviewQueue) -> list[tuple[str, str]]:
    """The values an adjudicator may settle an item with: (JSON, shown)."""
    rubric = queue.rubric
    kind = rubric["kind"]
    values: list[tuple[Any, str]]
    if kind == RubricKind.PASS_FAIL:
        values = [("pass", "pass"), ("fail", "fail")]
    elif kind == RubricKind.SCALE:
        values = [(n, str(n)) for n in range(1, 6)]
    elif kind == RubricKind.PREFERENCE:
        values = [("a", "this run"), ("b", "the other run"), ("tie", "tie")]
    elif rubric.get("multiple"):
        values = [([label], label) for label in rubric["labels"]]
    else:
        values = [(label, label) for label in rubric["labels"]]
    return [(json.dumps(value), shown) for value, shown in values]


@require_GET
def review_agreement(request: AuthedRequest, queue_id: int) -> HttpResponse:
    """The raters' agreement and the disputed items; editors only, since it
    shows who labelled what."""
    queue = selectors.queue_get(
        user=request.user, queue_id=queue_id, action=Action.EDIT
    )
    context = {
        "queue": queue,
        "sections": queue_agreement(queue=queue),
        "choices": adjudication_choices(queue),
        "criteria": queue.rubric.get("criteria", []),
        "progress": selectors.queue_progress(queue=queue, user=request.user),
    }
    return render(request, "runs/review/agreement.html", context)


def _posted(text: str, field: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        raise InvalidInput("not a value of the rubric", field=field) from None


@require_POST
def review_adjudicate(
    request: AuthedRequest, queue_id: int, item_id: int
) -> HttpResponse:
    """Settle a disputed item (or withdraw its settling) from the agreement page."""
    queue = selectors.queue_get(
        user=request.user, queue_id=queue_id, action=Action.EDIT
    )
    item = adjudication.review_item_get(queue=queue, review_item_id=item_id)
    try:
        if request.POST.get("withdraw"):
            adjudication.item_adjudication_withdraw(
                user=request.user, queue=queue, review_item=item
            )
            messages.success(request, f"Item {item.position} is back to its raters.")
        else:
            criteria = {
                name: _posted(request.POST.get(f"criterion-{name}", ""), name)
                for name in queue.rubric.get("criteria", [])
            }
            adjudication.item_adjudicate(
                user=request.user,
                queue=queue,
                review_item=item,
                value=_posted(request.POST.get("value", ""), "value"),
                criteria=criteria,
                note=request.POST.get("note", ""),
            )
            messages.success(request, f"Item {item.position} settled.")
    except InvalidInput as exc:
        messages.error(request, str(exc))
    return redirect("runs:review_agreement", queue_id=queue.pk)


@require_POST
def review_save_dataset(request: AuthedRequest, queue_id: int) -> HttpResponse:
    """Save the queue's labelled items as a dataset for the scorer target."""
    queue = selectors.queue_get(
        user=request.user, queue_id=queue_id, action=Action.EDIT
    )
    try:
        dataset = queue_dataset_create(
            user=request.user, queue=queue, name=request.POST.get("name", "")
        )
    except InvalidInput as exc:
        messages.error(request, str(exc))
        return redirect("runs:review_agreement", queue_id=queue.pk)
    messages.success(request, f"Saved {dataset.item_count} labelled items.")
    return redirect("runs:dataset_detail", dataset_id=dataset.pk)


@require_http_methods(["GET", "POST"])
def review_queue_new(request: AuthedRequest) -> HttpResponse:
    """Create a queue over a run (all of it, a filter, a cluster, a stratified
    sample) or a comparison of two runs, with its rubric; editors only."""
    initial = {"run": request.GET.get("run", "")}
    form = QueueForm(request.POST or None, initial=initial)
    if form.is_bound and form.is_valid():
        data = form.cleaned_data
        run = run_get(user=request.user, run_id=data["run"])
        require(request.user, run.project, Action.EDIT)
        other = None
        if data["source"] == ReviewSource.COMPARISON and data["other_run"]:
            other = run_get(user=request.user, run_id=data["other_run"])
        try:
            queue = services.queue_create(
                user=request.user,
                run=run,
                other_run=other,
                name=data["name"],
                description=data["description"],
                source=data["source"],
                source_params=form.source_params(),
                rubric=form.rubric(),
                raters=data["raters"],
                reviewers=form.reviewer_names() or None,
                blind=data["blind"],
            )
        except InvalidInput as exc:
            add_domain_error(form, exc)
        except Conflict as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, f"Queue {queue.scorer_name} created.")
            return redirect("runs:review_queue_list")
    return render(request, "runs/review/queue_new.html", {"form": form})
