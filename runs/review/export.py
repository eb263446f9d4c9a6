"""A queue's labelled items as a dataset for the ``scorer`` target.

Each item whose people's consensus is a verdict (pass or fail, not a tie)
becomes one item: its input is the output that was judged, its expected
answer the consensus verdict, and its metadata the judged item's own input
and expected answer (``metadata.input``, ``metadata.expected``), as the
``scorer`` target reads them; so a judge run on it with an ``exact_match``
scorer gives the judge's agreement with the people as its pass rate.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AnonymousUser, User

from runs.access import Action, require
from runs.datasets.importers import dataset_create_from_items
from runs.errors import InvalidInput
from runs.models import Dataset, ReviewItem, ReviewQueue, Score
from runs.review.selectors import as_text

NAME_MAX = 200
# The records' fields that become the items' input and expected answer.
OUTPUT_FIELD, VERDICT_FIELD = "judged_output", "verdict"


def labelled_items(queue: ReviewQueue) -> list[dict[str, Any]]:
    """The queue's items with a consensus verdict, in the queue's order, as
    records for the dataset importer (``OUTPUT_FIELD``, ``VERDICT_FIELD``)."""
    if queue.is_comparison:
        raise InvalidInput(
            "a comparison has no single output to judge; export a queue over a run",
            field="queue",
        )
    verdicts = dict(
        Score.objects.filter(
            result__run_id=queue.run_id,
            scorer=queue.scorer_name,
            passed__isnull=False,
        ).values_list("result_id", "passed")
    )
    rows = ReviewItem.objects.filter(queue=queue).select_related("item", "result")
    items: list[dict[str, Any]] = []
    seen: set[str] = set()
    for row in rows.order_by("position").iterator(chunk_size=1_000):
        passed = verdicts.get(row.result_id)
        if passed is None:
            continue
        key = row.item.external_id
        if key in seen:  # the same item in several epochs
            key = f"{key}@{row.position}"
        seen.add(key)
        items.append(
            {
                "id": key,
                OUTPUT_FIELD: as_text(row.result.output),
                VERDICT_FIELD: "pass" if passed else "fail",
                # The other fields are the items' metadata.
                "input": row.item.input,
                "expected": row.item.expected,
                "review_item": row.position,
            }
        )
    return items


def queue_dataset_create(
    *,
    user: User | AnonymousUser,
    queue: ReviewQueue,
    name: str = "",
    description: str = "",
) -> Dataset:
    """Save the queue's labelled items as a dataset (a new version of ``name``,
    by default "<queue> labels"); editors only."""
    require(user, queue.project, Action.EDIT)
    name = (name or f"{queue.name} labels").strip()
    if len(name) > NAME_MAX:
        raise InvalidInput(f"must be at most {NAME_MAX} characters", field="name")
    items = labelled_items(queue)
    if not items:
        raise InvalidInput(
            "no item has a consensus verdict yet (pass or fail, not a tie)",
            field="queue",
        )
    text = description or (
        f"People's verdicts of {queue.scorer_name}, for the scorer target: "
        "the input is the output judged, the expected answer the verdict."
    )
    return dataset_create_from_items(
        project=queue.project,
        user=user if isinstance(user, User) else None,
        name=name,
        items=items,
        input_field=OUTPUT_FIELD,
        expected_field=VERDICT_FIELD,
        description=text,
    )
