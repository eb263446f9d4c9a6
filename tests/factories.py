"""Small builders for test data, straight through the ORM."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from runs.models import Dataset, Item, Project, ProjectSecret
from runs.results.services import run_create


def make_dataset(
    project: Project,
    items: list[dict[str, Any]],
    *,
    name: str = "arith",
    version: int = 1,
) -> Dataset:
    """A dataset from dicts with ``id``, ``input``, ``expected`` and ``metadata``."""
    digest = hashlib.sha256(json.dumps(items, sort_keys=True).encode()).hexdigest()
    dataset = Dataset.objects.create(
        project=project,
        name=name,
        version=version,
        content_hash=digest,
        item_count=len(items),
        expected_count=sum(row.get("expected") is not None for row in items),
        source_format="jsonl",
    )
    Item.objects.bulk_create(
        Item(
            dataset=dataset,
            index=index,
            external_id=str(row.get("id", index)),
            input=row["input"],
            expected=row.get("expected"),
            metadata=row.get("metadata", {}),
        )
        for index, row in enumerate(items)
    )
    return dataset


def arithmetic_items(count: int, *, marker: str = "") -> list[dict[str, Any]]:
    """``count`` questions "What is a + b?" with their answers."""
    return [
        {
            "id": f"q{i}",
            "input": f"What is {i} + {i * 2}?{marker}",
            "expected": str(i * 3),
        }
        for i in range(count)
    ]


def echo_run(
    dataset: Dataset,
    *,
    scorers: list[Any] | None = None,
    options: dict[str, Any] | None = None,
) -> Any:
    """A run of ``dataset`` (echo target, ``scorers``: exact_match unless
    said) created but not launched."""

    return run_create(
        user=None,
        dataset=dataset,
        target_kind="python",
        target_config={"callable": "runs.targets.examples.echo"},
        scorers=scorers or ["exact_match"],
        options=options,
        launch=False,
    )


def store_outcomes(
    run: Any, outcomes: list[dict[str, Any]], *, epoch: int = 0, offset: int = 0
) -> Any:
    """Store one result per outcome through the executor's writer, as a run would.

    Each outcome is for the item of its position: ``{"error": (kind, type,
    message)}`` for a failed call (``status`` may say timed_out or cancelled),
    else a success with ``{"scores": [(scorer, passed, reason), ...]}``; a
    score given as ``(scorer, None, reason, error)`` is a scorer's error.
    The first outcome is for the item of index ``offset``. Returns the run,
    refreshed.
    """
    from django.utils import timezone

    from runs.executor.store import ResultRecord, ScoreRecord, results_write

    items = Item.objects.filter(dataset=run.dataset, index__gte=offset)
    items = list(items.order_by("index")[: len(outcomes)])
    now = timezone.now()
    records = []
    for item, outcome in zip(items, outcomes, strict=False):
        record = ResultRecord(
            item_id=item.pk,
            item_index=item.index,
            epoch=epoch,
            status="succeeded",
            output=f"answer {item.index}",
            attempts=[{"number": 1, "outcome": "ok"}],
            started_at=now,
            finished_at=now,
        )
        if "error" in outcome:
            kind, error_type, message = outcome["error"]
            record.status = outcome.get("status", "failed")
            record.output = None
            record.error_kind, record.error_type = kind, error_type
            record.error_message = message
        for scorer, passed, reason, *error in outcome.get("scores", []):
            value = None if error else float(bool(passed))
            record.scores.append(
                ScoreRecord(scorer, value, passed, reason=reason, error="".join(error))
            )
        records.append(record)
    results_write(run.pk, records)
    run.refresh_from_db()
    return run


def set_bound_secret(
    project: Project, user: Any, name: str, value: str, *, url: str
) -> ProjectSecret:
    """A project secret bound to the scheme, host and port of ``url``."""
    from runs.secrets.destinations import Destination
    from runs.secrets.store import secret_set

    secret, _ = secret_set(
        project=project,
        user=user,
        name=name,
        value=value,
        hosts=[str(Destination.of(url))],
    )
    return secret
