"""The items table's indexes: each one a lookup needs, none a prefix of another."""

from __future__ import annotations

import pytest
from django.db import connection

pytestmark = pytest.mark.django_db


def test_no_index_of_the_items_table_is_a_prefix_of_another() -> None:
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, "runs_item")
    indexed = [
        tuple(found["columns"])
        for found in constraints.values()
        if found["index"] or found["unique"]
    ]

    assert ("dataset_id", "index") in indexed
    assert ("dataset_id", "external_id") in indexed
    redundant = [
        columns
        for columns in indexed
        for other in indexed
        if columns != other and other[: len(columns)] == columns
    ]
    assert redundant == []
