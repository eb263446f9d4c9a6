"""The executor's page of items, compiled once, reads what the ORM reads: the
items in order after an index (and before one), their JSON as the ORM
decodes it, each with the epochs that still lack a result."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from django.db import connection

from runs.executor import store
from runs.executor.store import ItemData, ResultRecord
from runs.models import Item, Result
from runs.records.plain_rows import json_value
from runs.results.services import run_create
from tests.factories import make_dataset

T0 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)

INPUTS: list[Any] = [
    "What is 1 + 2?",
    {"question": "é ✓", "nested": {"list": [1, 2.5, None, True]}},
    [{"role": "user", "content": "hi"}],
    42,
    "quote ' and \\ backslash\nnew line\ttab \u2028",
    None,
]


def orm_page(
    dataset_id: int, after: int, stop: int | None, epochs: int, run_id: int
) -> list[tuple[ItemData, list[int]]]:
    """What the executor read before, through the ORM."""
    items = Item.objects.filter(dataset_id=dataset_id, index__gt=after)
    if stop is not None:
        items = items.filter(index__lt=stop)
    fields = ("pk", "index", "external_id", "input", "expected", "metadata")
    page = [
        ItemData(*row)
        for row in items.order_by("index").values_list(*fields)[: store.ITEM_PAGE_SIZE]
    ]
    done: dict[int, set[int]] = {}
    for index, epoch in Result.objects.filter(
        run_id=run_id, retry_pending=False
    ).values_list("item_index", "epoch"):
        done.setdefault(index, set()).add(epoch)
    return [
        (item, [e for e in range(epochs) if e not in done.get(item.index, ())])
        for item in page
    ]


@pytest.mark.django_db
@pytest.mark.parametrize("after, stop", [(-1, None), (2, None), (0, 5), (-1, 3)])
def test_item_page_reads_what_the_orm_reads(project, monkeypatch, after, stop):
    monkeypatch.setattr(store, "ITEM_PAGE_SIZE", 6)
    rows = [
        {
            "id": f"q{n}",
            "input": INPUTS[n % len(INPUTS)] or "x",
            "expected": None if n % 3 else str(n),
            "metadata": {"n": n, "tags": ["a", "b"]} if n % 2 else {},
        }
        for n in range(9)
    ]
    dataset = make_dataset(project, rows)
    run = run_create(
        user=None,
        dataset=dataset,
        target_kind="demo",
        target_config={},
        scorers=["exact_match"],
        options={"epochs": 3},
        launch=False,
    )
    items = list(dataset.items.order_by("index"))
    # Some epochs stored, one of them waiting for a retry (still lacking).
    records = [
        ResultRecord(
            item_id=item.pk,
            item_index=item.index,
            epoch=epoch,
            status=Result.Status.SUCCEEDED,
            output="x",
            attempts=[],
            started_at=T0,
            finished_at=T0,
        )
        for item in items[1:6]
        for epoch in (0, 2)
    ]
    store.results_write(run.pk, records)
    Result.objects.filter(run=run, item_index=3, epoch=2).update(retry_pending=True)

    got = store.item_page(
        dataset.pk, after_index=after, stop_index=stop, epochs=3, run_id=run.pk
    )

    assert got == orm_page(dataset.pk, after, stop, 3, run.pk)
    assert got  # not vacuous
    assert any(epochs == [1] for _, epochs in got)


TEXTS = [
    '"plain"',
    '"\\u00e9 \\ud83d\\ude00 \\n"',
    '{"a": [1, 2.5e10, -0.0, null, true]}',
    " [1, 2] ",
    "[1, 2]\n",
    "NaN",
    "Infinity",
    "1e400",
    "12345678901234567890123",
    "not json",
    '{"a": 1} trailing',
    "",
    "null",
    None,
]


@pytest.mark.parametrize("text", TEXTS)
def test_json_value_is_what_the_orm_decodes(text):
    field = Item._meta.get_field("input")
    expected = field.from_db_value(text, None, connection)
    got = json_value(text)
    assert json.dumps(got) == json.dumps(expected)
    assert type(got) is type(expected)
