"""Small builders for test data, straight through the ORM."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from runs.models import Dataset, Item, Project


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
