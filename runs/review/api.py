"""The review endpoints: queues (editors), the caller's next item, labels, matrices."""

from __future__ import annotations

from typing import Annotated, Any

from ninja import Field, Router, Status

from runs.access import Action
from runs.datasets.schemas import DatasetOut
from runs.models import ReviewLabel
from runs.results.selectors import run_get
from runs.review import adjudication, selectors, services
from runs.review.agreement import (
    DISPUTED_LIMIT,
    MAX_DISPUTED_LIMIT,
    queue_agreement,
)
from runs.review.export import queue_dataset_create
from runs.review.schemas import (
    AdjudicationIn,
    AdjudicationOut,
    CriterionAgreementOut,
    DatasetSaveIn,
    LabelCreateIn,
    LabelIn,
    LabelOut,
    MatrixOut,
    NextOut,
    QueueDetailOut,
    QueueIn,
    QueueOut,
    QueuePatchIn,
)
from runs.web.api import ERRORS, READ_ERRORS
from runs.web.requests import ApiRequest
from runs.web.schemas import DbId

review_router = Router(tags=["review"])


def _item(label: ReviewLabel) -> dict[str, Any]:
    text, expected, outputs = selectors.item_texts(label.queue, label)
    return {
        "label": label.pk,
        "item": label.review_item_id,
        "position": label.review_item.position,
        "input": text,
        "expected": expected,
        "outputs": [{"side": side, "text": text} for side, text in outputs],
        "value": selectors.shown_value(label.queue, label),
        "criteria": label.criteria,
        "note": label.note,
        "submitted": label.submitted,
    }


@review_router.get("", response={200: list[QueueOut], **READ_ERRORS})
def list_review_queues(request: ApiRequest, project: DbId | None = None) -> Any:
    """The review queues of your projects (or of one), newest first."""
    return list(selectors.queue_list(user=request.auth, project_id=project))


@review_router.post("", response={201: QueueDetailOut, **ERRORS})
def create_review_queue(request: ApiRequest, payload: QueueIn) -> Status[Any]:
    """A queue over an ended run (all of it, a filter, a cluster, a stratified
    sample) or over a comparison with ``other_run``; editors only."""
    run = run_get(user=request.auth, run_id=payload.run)
    other = None
    if payload.other_run is not None:
        other = run_get(user=request.auth, run_id=payload.other_run)
    queue = services.queue_create(
        user=request.auth,
        run=run,
        other_run=other,
        **payload.model_dump(exclude={"run", "other_run"}),
    )
    return Status(201, queue)


@review_router.get("/{queue_id}", response={200: QueueDetailOut, **READ_ERRORS})
def get_review_queue(request: ApiRequest, queue_id: DbId) -> Any:
    return selectors.queue_get(user=request.auth, queue_id=queue_id)


@review_router.patch("/{queue_id}", response={200: QueueDetailOut, **ERRORS})
def update_review_queue(
    request: ApiRequest, queue_id: DbId, payload: QueuePatchIn
) -> Any:
    queue = selectors.queue_get(user=request.auth, queue_id=queue_id)
    changes = payload.model_dump(exclude_unset=True)
    queue = services.queue_update(user=request.auth, queue=queue, changes=changes)
    return queue


@review_router.delete("/{queue_id}", response={204: None, **ERRORS})
def delete_review_queue(request: ApiRequest, queue_id: DbId) -> Status[None]:
    """Delete a queue with its labels and its scores on the run."""
    queue = selectors.queue_get(user=request.auth, queue_id=queue_id)
    services.queue_delete(user=request.auth, queue=queue)
    return Status(204, None)


@review_router.post("/{queue_id}/next", response={200: NextOut, **ERRORS})
def next_review_item(request: ApiRequest, queue_id: DbId) -> Any:
    """The caller's next item: one handed to them and not yet labelled, else a
    new one (never one they had before, never past the queue's raters)."""
    queue = selectors.queue_get(user=request.auth, queue_id=queue_id)
    label = services.label_next(user=request.auth, queue=queue)
    if label is None:
        return {"done": True, "item": None}
    return {"done": False, "item": _item(label)}


@review_router.post("/{queue_id}/labels", response={200: LabelOut, **ERRORS})
def create_label(request: ApiRequest, queue_id: DbId, payload: LabelCreateIn) -> Any:
    """Label an item handed to the caller."""
    queue = selectors.queue_get(user=request.auth, queue_id=queue_id)
    label = services.label_for_item(
        user=request.auth, queue=queue, review_item_id=payload.item
    )
    return _save(request, label, payload)


@review_router.put("/{queue_id}/labels/{label_id}", response={200: LabelOut, **ERRORS})
def update_label(
    request: ApiRequest, queue_id: DbId, label_id: DbId, payload: LabelIn
) -> Any:
    """Change the caller's label (kept in its history)."""
    queue = selectors.queue_get(user=request.auth, queue_id=queue_id)
    label = selectors.label_get(user=request.auth, queue=queue, label_id=label_id)
    return _save(request, label, payload)


def _save(request: ApiRequest, label: ReviewLabel, payload: LabelIn) -> ReviewLabel:
    return services.label_save(
        user=request.auth,
        label=label,
        value=payload.value,
        criteria=payload.criteria,
        note=payload.note,
    )


@review_router.get("/{queue_id}/matrix", response={200: MatrixOut, **ERRORS})
def label_matrix(
    request: ApiRequest, queue_id: DbId, criterion: str | None = None
) -> Any:
    """Every rater's labels, items by raters (null where missing), for
    agreement; editors only, since it shows who labelled what."""
    queue = selectors.queue_get(
        user=request.auth, queue_id=queue_id, action=Action.EDIT
    )
    return selectors.queue_label_matrix(queue=queue, criterion=criterion)


@review_router.get(
    "/{queue_id}/agreement", response={200: list[CriterionAgreementOut], **ERRORS}
)
def queue_agreement_get(
    request: ApiRequest,
    queue_id: DbId,
    disputed: Annotated[int, Field(ge=0, le=MAX_DISPUTED_LIMIT)] = DISPUTED_LIMIT,
) -> Any:
    """Agreement between the raters (percent, Cohen's and Fleiss' kappa,
    Krippendorff's alpha at the rubric's level, with bootstrap intervals),
    per criterion, and the first ``disputed`` disputed items; editors only,
    as the matrix."""
    queue = selectors.queue_get(
        user=request.auth, queue_id=queue_id, action=Action.EDIT
    )
    return queue_agreement(queue=queue, disputed_limit=disputed)


@review_router.post(
    "/{queue_id}/items/{item_id}/adjudication",
    response={201: AdjudicationOut, **ERRORS},
)
def adjudicate_item(
    request: ApiRequest, queue_id: DbId, item_id: DbId, payload: AdjudicationIn
) -> Status[Any]:
    """Settle an item with the adjudicator's label: it becomes the item's
    consensus score (kept with who and when); editors only."""
    queue = selectors.queue_get(user=request.auth, queue_id=queue_id)
    item = adjudication.review_item_get(queue=queue, review_item_id=item_id)
    row = adjudication.item_adjudicate(
        user=request.auth, queue=queue, review_item=item, **payload.model_dump()
    )
    return Status(201, row)


@review_router.delete(
    "/{queue_id}/items/{item_id}/adjudication", response={204: None, **ERRORS}
)
def withdraw_adjudication(
    request: ApiRequest, queue_id: DbId, item_id: DbId
) -> Status[None]:
    """Withdraw the item's adjudication: the raters' consensus returns."""
    queue = selectors.queue_get(user=request.auth, queue_id=queue_id)
    item = adjudication.review_item_get(queue=queue, review_item_id=item_id)
    adjudication.item_adjudication_withdraw(
        user=request.auth, queue=queue, review_item=item
    )
    return Status(204, None)


@review_router.post("/{queue_id}/dataset", response={201: DatasetOut, **ERRORS})
def save_review_dataset(
    request: ApiRequest, queue_id: DbId, payload: DatasetSaveIn
) -> Status[Any]:
    """Save the labelled items as a dataset for the ``scorer`` target: input
    the output judged, expected the people's verdict, metadata the judged
    item's input and expected answer; editors only."""
    queue = selectors.queue_get(user=request.auth, queue_id=queue_id)
    dataset = queue_dataset_create(
        user=request.auth,
        queue=queue,
        name=payload.name,
        description=payload.description,
    )
    return Status(201, dataset)
