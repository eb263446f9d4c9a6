"""Cache keys: built from typed parts only, under one generation."""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from decimal import Decimal
from typing import NamedTuple

import pytest
from django.contrib.auth.models import AnonymousUser
from django.test import RequestFactory
from django.utils.translation import gettext_lazy

from runs.models import Dataset, Project, Run
from runs.records import cache_keys, pagecache
from runs.records.versions import results_changed, runs_results_changed
from tests.factories import arithmetic_items, echo_run, make_dataset

WHEN = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)


@dataclass(frozen=True)
class Row:
    name: str
    count: int


class Pair(NamedTuple):
    name: str
    size: int


def same_in_every_process(part: object) -> str:
    """The part's repr without the addresses in it: a test's id is the same in
    every process that collects it (pytest-xdist's workers compare theirs)."""
    return re.sub(r" at 0x[0-9a-f]+", "", repr(part))


def test_keys_take_the_typed_parts_and_nest_them_in_tuples() -> None:
    parts = ("a", 1, 2.5, True, None, WHEN, ("b", (3, None)))

    key = cache_keys.key("kind", *parts)

    assert key.startswith(f"kind:{cache_keys.generation()}:")
    assert key == cache_keys.key("kind", *parts)


@pytest.mark.parametrize(
    "part",
    [
        object(),
        ["a list"],
        {"a": "dict"},
        {1, 2},
        b"bytes",
        Decimal("1.5"),
        dt.date(2026, 1, 2),
        gettext_lazy("now"),
        Row("r", 1),
        ("nested", [1]),
        (("deeper", object()),),
        ((1, "a"), (2, ("b", (3, {"c"})))),
        Pair("a", 1),
        (Pair("a", 1),),
    ],
    ids=same_in_every_process,
)
def test_keys_refuse_any_other_part(part: object) -> None:
    with pytest.raises(TypeError, match="cache key part"):
        cache_keys.key("kind", part)


def test_equal_parts_of_distinct_objects_make_one_key() -> None:
    def parts(n: int) -> tuple[object, ...]:
        name = "".join(["run ", str(n)])
        return (
            name,
            (name, WHEN),
            (n, float(n)),
            (dt.datetime.fromisoformat(str(WHEN)),),
        )

    assert parts(7) is not parts(7)
    assert cache_keys.key("kind", *parts(7)) == cache_keys.key("kind", *parts(7))
    assert cache_keys.key("kind", *parts(7)) != cache_keys.key("kind", *parts(8))


def test_equal_reprs_of_other_types_make_other_keys() -> None:
    keys = {cache_keys.key("kind", part) for part in (1, "1", 1.0, True, (1,))}

    assert len(keys) == 5


@dataclass(frozen=True, slots=True)
class One:
    value: int


@dataclass(frozen=True)
class Empty:
    pass


def test_a_dataclass_is_a_part_through_record() -> None:
    assert cache_keys.record(Row("r", 1)) == ("r", 1)
    assert cache_keys.record(Row("s", 2)) == ("s", 2)
    assert cache_keys.record(One(3)) == (3,)
    assert cache_keys.record(Empty()) == ()
    assert cache_keys.key("kind", cache_keys.record(Row("r", 1))) != (
        cache_keys.key("kind", cache_keys.record(Row("r", 2)))
    )


def test_the_generation_holds_the_code_generation_and_the_newest_migration() -> None:
    code, migration = cache_keys.generation().split(".", 1)

    assert code == str(cache_keys.CODE_GENERATION)
    assert migration[:4].isdigit() and "_" in migration


def test_a_page_key_refuses_data_without_a_faithful_repr() -> None:
    request = RequestFactory().get("/?page=2")
    request.user = AnonymousUser()

    with pytest.raises(TypeError):
        pagecache.page_key(request, "runs/results/run_list.html", (object(),))
    assert pagecache.page_key(request, "t.html", (1,)) != pagecache.page_key(
        request, "t.html", (2,)
    )


@pytest.mark.django_db
def test_results_changed_moves_the_results_version_of_its_runs_only(
    project: Project,
) -> None:
    dataset: Dataset = make_dataset(project, arithmetic_items(2))
    run, other, third = echo_run(dataset), echo_run(dataset), echo_run(dataset)
    versions = {r.pk: Run.objects.get(pk=r.pk).results_version for r in (run, other)}
    summary_key = cache_keys.run_summary(Run.objects.get(pk=run.pk))

    results_changed(run)
    runs_results_changed([other.pk, other.pk])

    assert run.results_version != versions[run.pk]
    assert Run.objects.get(pk=run.pk).results_version == run.results_version
    assert Run.objects.get(pk=other.pk).results_version != versions[other.pk]
    assert Run.objects.get(pk=third.pk).revision == third.revision
    assert cache_keys.run_summary(Run.objects.get(pk=run.pk)) != summary_key
