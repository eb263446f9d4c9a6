"""``plain_rows.Table`` computes the defaults of the columns a caller does not
fill once per process: a column whose value must be computed per row is
refused when the table is built, not stored wrong."""

from __future__ import annotations

import pytest
from django.utils import timezone

from runs.datasets.importers.store import ITEM_FIELDS
from runs.models import Item, Result, Score
from runs.records import rows
from runs.records.plain_rows import Table

# Every column the executor fills but ``finished_at``: a DateTimeField left to
# its default, as a future column of the kind would be.
WITHOUT_FINISHED = tuple(name for name in rows.RESULT_FIELDS if name != "finished_at")


def test_the_tables_in_use_are_built():
    # Their callable defaults (attempts=list, metadata=dict) are filled.
    assert Table(Result, rows.RESULT_FIELDS).columns[-1] == "retry_pending"
    assert Table(Score, rows.SCORE_FIELDS).defaults == ()
    assert Table(Item, ITEM_FIELDS).defaults == ()


def test_a_callable_default_left_to_the_table_is_refused(monkeypatch):
    # Computed once, timezone.now would stamp every row of the process with
    # the first one's time.
    field = Result._meta.get_field("finished_at")
    monkeypatch.setattr(field, "default", timezone.now)
    with pytest.raises(ValueError, match=r"Result\.finished_at has a callable"):
        Table(Result, WITHOUT_FINISHED)
    # Filled by the caller, the same column is fine.
    assert "finished_at" in Table(Result, rows.RESULT_FIELDS).columns


@pytest.mark.parametrize("flag", ["auto_now", "auto_now_add"])
def test_an_auto_now_column_left_to_the_table_is_refused(monkeypatch, flag):
    # pre_save sets these on a model instance; a plain row would get their
    # default, None, and store NULL.
    field = Result._meta.get_field("finished_at")
    monkeypatch.setattr(field, flag, True)
    with pytest.raises(ValueError, match=r"Result\.finished_at is set on save"):
        Table(Result, WITHOUT_FINISHED)


def test_a_database_default_left_to_the_table_is_refused(monkeypatch):
    field = Result._meta.get_field("finished_at")
    monkeypatch.setattr(field, "db_default", timezone.now())
    with pytest.raises(ValueError, match=r"Result\.finished_at has a database"):
        Table(Result, WITHOUT_FINISHED)
