"""The demo run that the runs page and the new-run form offer: which dataset and
target of the user's projects it would take."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import Case, F, QuerySet, Subquery, Value, When
from django.db.models.functions import Lower, StrIndex
from django.db.models.lookups import GreaterThan

from runs.access import (
    Action,
    project_ids_where,
    roles_allowed,
)
from runs.datasets.selectors import dataset_list
from runs.models import Dataset, Membership, Target
from runs.records import compiled
from runs.records.compiled import Args

DEMO_RUN_NAME = "Demo run"
DEMO_RUN_SCORERS = ["exact_match"]
DEMO_RUN_CONCURRENCY = 4


def _demo_targets(user: User | AnonymousUser) -> QuerySet[Target]:
    """The demo targets in the projects the user may run in, oldest first."""
    return Target.objects.filter(
        kind="demo", project_id__in=project_ids_where(user, Action.EDIT)
    ).order_by("created_at", "pk")


# The demo model solves arithmetic: the largest arithmetic dataset has something
# to watch; without one, the newest dataset.
def _arithmetic_first(datasets: QuerySet[Dataset]) -> QuerySet[Dataset]:
    return datasets.filter(name__icontains="arith").order_by("-item_count", "-version")


def _newest_first(datasets: QuerySet[Dataset]) -> QuerySet[Dataset]:
    return datasets.order_by("-created_at", "-version")


def run_demo_choice(*, user: User) -> tuple[Dataset, Target] | None:
    """A demo target the user may run, with a dataset of its project it can answer."""
    target = _demo_targets(user).first()
    if target is None:
        return None
    datasets = dataset_list(user=user, project_id=target.project_id)
    dataset = _arithmetic_first(datasets).first() or _newest_first(datasets).first()
    return (dataset, target) if dataset is not None else None


@dataclass(frozen=True, slots=True)
class DemoOffer:
    target_name: str
    dataset_name: str
    dataset_version: int


EDIT_ROLES = roles_allowed(Action.EDIT)


# ``run_demo_choice`` as one read: the dataset that the choice takes (the
# arithmetic one with the most items, else the newest) in the project of the
# first demo target of the projects where the user may run, with that
# target's name, as values. The ORM builds these queries in several times
# the time the database runs them, and the runs page asks on every view:
# compiled once (records/compiled.py); tests/test_demo.py checks that both
# choose alike.
def _demo_offer(args: Args) -> QuerySet[Dataset, Any]:
    runnable = Membership.objects.filter(
        user_id=args.integer("user_id"),
        role__in=EDIT_ROLES,
    ).values("project_id")
    first_target = Target.objects.filter(kind="demo", project_id__in=runnable).order_by(
        "created_at", "pk"
    )
    # ``name__icontains`` without LIKE ... ESCAPE, which SQLite runs slowly.
    arithmetic = GreaterThan(StrIndex(Lower("name"), Value("arith")), 0)
    return (
        Dataset.objects.filter(
            project_id=Subquery(first_target.values("project_id")[:1]),
            status=Dataset.Status.READY,
        )
        .order_by(
            Case(When(arithmetic, then=1), default=0).desc(),
            Case(When(arithmetic, then=F("item_count")), default=0).desc(),
            # Arithmetic datasets by size alone; the others, newest first.
            Case(When(arithmetic, then=None), default=F("created_at")).desc(),
            "-version",
        )
        .values(
            "name",
            "version",
            target_name=Subquery(first_target.values("name")[:1]),
        )[:1]
    )


def run_demo_offer(*, user: User | AnonymousUser) -> DemoOffer | None:
    """What ``run_demo_choice`` would start, for the button on the runs page.

    The same choice in one statement (``_demo_offer``), with only the names
    and the version shown.
    """
    if not user.is_authenticated:
        return None
    read = compiled.statement("demo-offer", _demo_offer)
    row = compiled.one(read, {"user_id": user.pk})
    if row is None:
        return None
    return DemoOffer(row["target_name"], row["name"], row["version"])
