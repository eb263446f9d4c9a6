"""Storing an import: short transactions for the database, all or nothing for people."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import OperationalError, connections
from django.test import Client
from django.utils import timezone

from runs.datasets.importers import dataset_import, dataset_imports_clean
from runs.datasets.importers import store as import_store
from runs.datasets.selectors import dataset_list
from runs.errors import InvalidInput
from runs.models import Dataset, Item, Project
from runs.records import plain_rows

ITEMS = 25


def _content(count: int = ITEMS) -> bytes:
    rows = ({"id": f"q{n}", "input": f"{n}?", "expected": str(n)} for n in range(count))
    return "\n".join(json.dumps(row) for row in rows).encode()


def _import(project: Project, **kw: Any) -> Dataset:
    return dataset_import(
        project=project,
        user=None,
        name=kw.pop("name", "qa"),
        content=kw.pop("content", _content()),
        filename="x.jsonl",
        **kw,
    )


def _committed_items() -> int:
    """Items another connection sees, i.e. committed ones."""
    seen: list[int] = []

    def count() -> None:
        try:
            seen.append(Item.objects.count())
        finally:
            connections.close_all()

    thread = threading.Thread(target=count)
    thread.start()
    thread.join()
    return seen[0]


def _on_item_insert(
    monkeypatch: pytest.MonkeyPatch, batch: int, action: Callable[[], None]
) -> None:
    """Call ``action`` before the ``batch``-th batch of items is inserted (a
    multi-row INSERT on SQLite, COPY on PostgreSQL)."""
    insert = plain_rows.insert
    inserts = 0

    def counted(table: plain_rows.Table, rows: Any, **kwargs: Any) -> Any:
        nonlocal inserts
        if table.table == Item._meta.db_table:
            inserts += 1
            if inserts == batch:
                action()
        return insert(table, rows, **kwargs)

    monkeypatch.setattr(plain_rows, "insert", counted)


@pytest.mark.django_db(transaction=True)
def test_items_are_committed_in_batches_while_the_dataset_stays_hidden(
    project: Project, alice: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(import_store, "BATCH_SIZE", 10)
    during: dict[str, Any] = {}

    def look() -> None:
        during["committed"] = _committed_items()
        during["visible"] = list(dataset_list(user=alice))
        during["importing"] = Dataset.all_objects.filter(
            status=Dataset.Status.IMPORTING
        ).count()

    _on_item_insert(monkeypatch, 3, look)
    dataset = _import(project)

    # Two batches were already committed: another writer was not kept waiting.
    assert during == {"committed": 20, "visible": [], "importing": 1}
    dataset.refresh_from_db()
    assert (dataset.status, dataset.version, dataset.item_count) == ("ready", 1, 25)
    assert list(dataset_list(user=alice)) == [dataset]
    assert dataset.items.count() == ITEMS


@pytest.mark.django_db(transaction=True)
def test_a_failure_while_writing_leaves_nothing(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(import_store, "BATCH_SIZE", 10)

    def fail() -> None:
        raise OperationalError("disk I/O error")

    _on_item_insert(monkeypatch, 3, fail)
    with pytest.raises(OperationalError):
        _import(project)

    assert Dataset.all_objects.count() == 0
    assert Item.objects.count() == 0


@pytest.mark.django_db
def test_an_import_in_progress_is_hidden_from_pages_and_api(
    project: Project, alice_client: Client
) -> None:
    hidden = Dataset.all_objects.create(
        project=project, name="qa", version=0, status=Dataset.Status.IMPORTING
    )

    assert not Dataset.objects.filter(pk=hidden.pk).exists()
    assert alice_client.get(f"/api/v1/datasets/{hidden.pk}").status_code == 404
    assert alice_client.get("/api/v1/datasets").json()["items"] == []
    assert alice_client.get(f"/datasets/{hidden.pk}/").status_code == 404


@pytest.mark.django_db
def test_a_crashed_import_is_cleaned_up_by_the_next(project: Project) -> None:
    long_ago = timezone.now() - timedelta(hours=1)
    crashed = Dataset.all_objects.create(
        project=project,
        name="qa",
        version=0,
        status=Dataset.Status.IMPORTING,
        import_touched_at=long_ago,
    )
    Item.objects.create(dataset=crashed, index=0, external_id="x", input="x")
    running = Dataset.all_objects.create(
        project=project,
        name="qa",
        version=0,
        status=Dataset.Status.IMPORTING,
        import_touched_at=timezone.now(),
    )

    dataset = _import(project)

    assert dataset.version == 1  # unfinished imports take no version number
    assert set(Dataset.all_objects.values_list("pk", flat=True)) == {
        dataset.pk,
        running.pk,
    }
    assert Item.objects.filter(dataset_id=crashed.pk).count() == 0


@pytest.mark.django_db
def test_cleaning_leaves_finished_datasets_alone(project: Project) -> None:
    dataset = _import(project)
    Dataset.all_objects.filter(pk=dataset.pk).update(
        import_touched_at=timezone.now() - timedelta(days=1)
    )

    assert dataset_imports_clean() == 0
    assert Dataset.objects.get().items.count() == ITEMS


@pytest.mark.django_db
def test_the_dataset_records_its_fields_and_expected_answers(project: Project) -> None:
    content = (
        b'{"id": "a", "input": "1", "answer": "x", "topic": "t"}\n'
        b'{"id": "b", "input": "2", "answer": null}\n'
    )

    dataset = _import(project, content=content, expected_field="answer")

    dataset.refresh_from_db()
    assert (dataset.expected_count, dataset.expected_field) == (1, "answer")
    assert dataset.field_counts == {"id": 2, "input": 2, "answer": 1, "topic": 1}


@pytest.mark.django_db
def test_an_expected_field_no_item_has_is_refused_listing_the_fields(
    project: Project,
) -> None:
    """The answers were in "answer": a silent import scored 0.0 everywhere."""
    content = b'{"id": "a", "input": "1", "answer": "x"}\n'

    with pytest.raises(InvalidInput) as info:
        _import(project, content=content)

    assert info.value.field == "expected_field"
    assert str(info.value) == (
        "field 'expected_field': no item has a value for 'expected'; the fields "
        "found are 'id', 'input', 'answer'. Name the field that holds the expected "
        "answer (perhaps 'answer'?), or say that the items have none"
    )
    assert Dataset.all_objects.count() == 0


@pytest.mark.django_db
@pytest.mark.parametrize("none", [None, ""])
def test_no_expected_answer_may_be_said(project: Project, none: str | None) -> None:
    content = b'{"id": "a", "input": "1", "answer": "x"}\n'

    dataset = _import(project, content=content, expected_field=none)

    assert dataset.expected_count == 0
    assert dataset.items.get().metadata == {"answer": "x"}


@pytest.mark.django_db
def test_items_are_stored_as_the_orm_stores_them(project: Project) -> None:
    """Items go in as plain rows: every JSON shape must read back as it would
    from Item.objects.bulk_create."""
    values: list[Any] = [
        "plain",
        {"messages": [{"role": "user", "content": "é ✓ \\ ' \" \n\t"}]},
        ["a", None, True, 2.5],
        42,
        0.1,
        {"nested": {"deep": [[], {}]}},
    ]
    records = [
        {"id": f"q{n}", "input": value, "expected": values[-1 - n], "meta": n}
        for n, value in enumerate(values)
    ]
    records.append({"id": "no-expected", "input": "x"})
    content = "\n".join(json.dumps(record) for record in records).encode()
    dataset = _import(project, content=content)
    other = Dataset.all_objects.create(
        project=project, name="orm", version=1, content_hash="x", item_count=0
    )
    stored = list(dataset.items.order_by("index"))
    Item.objects.bulk_create(
        Item(
            dataset=other,
            index=item.index,
            external_id=item.external_id,
            input=item.input,
            expected=item.expected,
            metadata=item.metadata,
        )
        for item in stored
    )
    fields = ("index", "external_id", "input", "expected", "metadata")
    assert [item.input for item in stored[: len(values)]] == values
    assert stored[-1].expected is None
    assert list(dataset.items.order_by("index").values_list(*fields)) == list(
        other.items.order_by("index").values_list(*fields)
    )
    # The same SQL NULL, not a JSON null, where an item has no expected answer.
    assert Item.objects.filter(expected__isnull=True).count() == 2
