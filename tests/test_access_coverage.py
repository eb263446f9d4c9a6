"""Every page and every API operation, tried by every persona.

``PAGES`` and ``OPERATIONS`` declare, for each URL name of the ``runs:``
namespace and each (method, path) of the API, the requests to make and what
they need: a signed-in user (``ACCOUNT``), one of the user's own objects
(``OWNER``: bob's key and bob's staged upload), or an action in the project.
Each request is made against the real views by anonymous, mallory (an
outsider), victor (viewer), bob (editor) and alice (admin), and the answer is
held to what the need says: anonymous is sent to the login page (the API
answers 401), an outsider is told the project does not exist (404), a member
below the role is refused (403), and the others get through. A URL or an
operation added without an entry here fails ``test_every_*_is_declared``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.cache import caches
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import transaction
from django.http import HttpResponse
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from django.utils import timezone

from runs.alerts.services import channel_create
from runs.api import api
from runs.datasets.importers import staging
from runs.evaluations.services import evaluation_create
from runs.executor import launchers
from runs.models import (
    Dataset,
    Project,
    Result,
    ReviewLabel,
    Run,
    RunStatus,
    Schedule,
    Target,
)
from runs.projects.services import api_key_create
from runs.review.services import label_next, queue_create
from runs.secrets import store
from tests.factories import echo_run, store_outcomes

API = "/api/v1"

# The roles each need lets through, declared here apart from the policy
# (runs/access.py), so that a change of the policy shows as a failure.
VIEW, EDIT, MANAGE = "view", "edit", "manage"
ACCOUNT, OWNER = "account", "owner"
LETS_THROUGH = {
    VIEW: {"viewer", "editor", "admin"},
    EDIT: {"editor", "admin"},
    MANAGE: {"admin"},
}
PERSONAS = {"anonymous": None, "mallory": None, "victor": "viewer"}
PERSONAS |= {"bob": "editor", "alice": "admin"}
OWNER_NAME = "bob"

LOGIN, HIDDEN, FORBIDDEN, THROUGH = "login", "hidden (404)", "forbidden (403)", "ok"


@dataclass
class World:
    project: Project
    dataset: Dataset
    target: Target
    run: Run
    result: Result
    users: dict[str, User]
    key_id: int
    token: str
    secret: str = "API_TOKEN"
    channel_id: int = 0
    evaluation_id: int = 0
    schedule_id: int = 0
    queue_id: int = 0
    label_id: int = 0
    item_id: int = 0


Build = Callable[[World], Any]


@dataclass(frozen=True)
class Check:
    method: str
    need: str
    # A page's URL arguments, by name (see ``_ids``); an operation's path
    # takes them from its own placeholders.
    args: tuple[str, ...] = ()
    query: str = ""  # formatted with the same ids
    data: Build | None = None
    # A persona whose answer differs from the need's, with the reason.
    unlike: dict[str, str] = field(default_factory=dict)
    # A list: an outsider gets it, without the project's objects in it.
    scoped: bool = False


def _ids(w: World) -> dict[str, Any]:
    return {
        "run_id": w.run.pk,
        "result_id": w.result.pk,
        "dataset_item_id": w.result.item_id,
        "dataset_id": w.dataset.pk,
        "target_id": w.target.pk,
        "project_id": w.project.pk,
        "user_id": w.users["victor"].pk,
        "key_id": w.key_id,
        "token": w.token,
        "name": w.secret,
        "format": "csv",
        "channel_id": w.channel_id,
        "evaluation_id": w.evaluation_id,
        "schedule_id": w.schedule_id,
        "queue_id": w.queue_id,
        "label_id": w.label_id,
        "item_id": w.item_id,
    }


def _jsonl(_: World | None = None) -> SimpleUploadedFile:
    body = b'{"id": "a", "input": "1 + 1", "expected": "2"}\n'
    return SimpleUploadedFile("extra.jsonl", body, content_type="application/x-ndjson")


def _run_form(w: World) -> dict[str, Any]:
    return {
        "dataset": w.dataset.pk,
        "target": w.target.pk,
        "scorers": ["exact_match"],
        "concurrency": 1,
        "timeout_seconds": 10,
        "max_attempts": 1,
        "epochs": 1,
        "name": "coverage",
    }


def _upload(w: World) -> dict[str, Any]:
    return {"project": w.project.pk, "name": "extra", "file": _jsonl()}


def _given(data: dict[str, Any]) -> Build:
    return lambda w: data


def _new_in_project(w: World) -> dict[str, Any]:
    return {"project": w.project.pk, "name": "new", "kind": "demo"}


def _tool_span(w: World) -> dict[str, Any]:
    """An OTLP/JSON request: one tool span, for the world's run's first item."""

    def attribute(key: str, value: Any) -> dict[str, Any]:
        kind = "intValue" if isinstance(value, int) else "stringValue"
        return {"key": key, "value": {kind: value}}

    span = {
        "traceId": "0af7651916cd43dd8448eb211c80319c",
        "spanId": "b7ad6b7169203331",
        "name": "execute_tool search",
        "startTimeUnixNano": "1700000000000000000",
        "endTimeUnixNano": "1700000000100000000",
        "attributes": [
            attribute("gen_ai.operation.name", "execute_tool"),
            attribute("gen_ai.tool.name", "search"),
        ],
    }
    resource = {
        "attributes": [
            attribute("evalsite.run_id", w.run.pk),
            attribute("evalsite.item_index", 0),
        ]
    }
    return {
        "resourceSpans": [{"resource": resource, "scopeSpans": [{"spans": [span]}]}]
    }


def _evaluation_form(w: World) -> dict[str, Any]:
    return _run_form(w) | {
        "name": "release",
        "dataset_policy": "fixed",
        "baseline_policy": "previous",
    }


def _new_evaluation(w: World) -> dict[str, Any]:
    return {
        "project": w.project.pk,
        "name": "new",
        "dataset": w.dataset.pk,
        "target": w.target.pk,
        "scorers": ["exact_match"],
    }


RUN = ("run_id",)
CHANNEL = ("channel_id",)
NEW_CHANNEL = _given({"name": "more", "kind": "email", "emails": "a@example.org"})
EVALUATION = ("evaluation_id",)
SCHEDULE = _given({"cron": "0 3 * * *", "timezone": "UTC"})
PROJECT = ("project_id",)
COMPARE = "?baseline={run_id}&candidates={run_id}"
PAIR = "?baseline={run_id}&candidate={run_id}&scorer=exact_match"
RANK = "?runs={run_id}"
DIFF = "?item={dataset_item_id}&runs={run_id},{run_id}"
PLAN = COMPARE + "&delta=0.1&pass_rate=0.5&discordance=0.2"
# Leaving a project needs only membership: victor may remove himself.
LEAVES = {"victor": THROUGH}
INVITE = _given({"user": "mallory", "role": "viewer"})
PROMOTE = _given({"role": "editor"})
RENAME = _given({"name": "renamed"})
TRY = _given({"input": "1 + 1"})
RESCORE = _given({"scorers": ["numeric"]})
RENOTE = _given({"description": "what to look for"})
SETTLE = _given({"value": "fail"})
THRESHOLDS = _given({"judge_min_items": 20})
THRESHOLDS_FORM = _given({"judge_kappa_threshold": 0.7, "judge_min_items": 20})
SETTLE_FORM = _given({"value": '"fail"'})


def _own_label(w: World) -> dict[str, Any]:
    """The review item handed to bob (OWNER_NAME), labelled."""
    label = ReviewLabel.objects.get(pk=w.label_id)
    return {"item": label.review_item_id, "value": "pass"}


PAGES: dict[str, list[Check]] = {
    "run_list": [Check("GET", ACCOUNT, scoped=True)],
    "run_new": [Check("POST", EDIT, data=_run_form)],
    "run_detail": [Check("GET", VIEW, RUN)],
    "run_live_figures": [Check("GET", VIEW, RUN)],
    "run_cancel": [Check("POST", EDIT, RUN)],
    "result_detail": [Check("GET", VIEW, ("run_id", "result_id"))],
    "run_export": [Check("GET", VIEW, ("run_id", "format"))],
    "run_demo_start": [Check("POST", EDIT)],
    "dataset_list": [Check("GET", ACCOUNT, scoped=True)],
    "dataset_upload": [Check("POST", EDIT, data=_upload)],
    "dataset_upload_map": [Check("GET", OWNER, ("token",))],
    "dataset_detail": [Check("GET", VIEW, ("dataset_id",))],
    "target_list": [Check("POST", EDIT, data=_new_in_project)],
    "target_detail": [
        Check("GET", VIEW, ("target_id",)),
        Check("POST", EDIT, ("target_id",), data=RENAME),
    ],
    "target_delete": [Check("POST", EDIT, ("target_id",))],
    "target_try": [Check("POST", EDIT, ("target_id",), data=TRY)],
    "project_list": [Check("GET", ACCOUNT, scoped=True)],
    "project_detail": [Check("GET", VIEW, PROJECT)],
    "project_member_add": [Check("POST", MANAGE, PROJECT, data=INVITE)],
    "project_member_update": [
        Check("POST", MANAGE, ("project_id", "user_id"), data=PROMOTE)
    ],
    "project_member_remove": [
        Check("POST", MANAGE, ("project_id", "user_id"), unlike=LEAVES)
    ],
    "account_keys": [Check("GET", ACCOUNT)],
    "account_key_revoke": [Check("POST", OWNER, ("key_id",))],
    "project_secrets": [
        Check("GET", VIEW, PROJECT),
        Check(
            "POST",
            MANAGE,
            PROJECT,
            data=_given({"name": "OTHER", "value": "v-1", "hosts": "b.example"}),
        ),
    ],
    "project_secret_delete": [Check("POST", MANAGE, ("project_id", "name"))],
    "catalogue": [Check("GET", ACCOUNT)],
    "compare": [Check("GET", VIEW, query=COMPARE)],
    "compare_items_csv": [Check("GET", VIEW, query=PAIR)],
    "run_compare_choices": [Check("GET", VIEW, RUN)],
    "leaderboard": [Check("GET", VIEW, query=RANK)],
    "run_clusters": [
        Check("GET", VIEW, RUN),
        Check("GET", VIEW, RUN, query="?by=content"),
    ],
    "trajectory_diff": [Check("GET", VIEW, query=DIFF)],
    "run_cluster_save": [
        Check("POST", EDIT, RUN, data=_given({"cluster": "none", "name": "saved"}))
    ],
    "run_retry": [
        Check("GET", EDIT, RUN),
        Check("POST", EDIT, RUN, data=_given({"status": "failed"})),
    ],
    "run_resume": [Check("POST", EDIT, RUN)],
    "run_rescore": [Check("GET", EDIT, RUN), Check("POST", EDIT, RUN, data=RESCORE)],
    "run_scoring_passes": [Check("GET", VIEW, RUN)],
    "channel_list": [
        Check("GET", VIEW, PROJECT),
        Check("POST", EDIT, PROJECT, data=NEW_CHANNEL),
    ],
    "channel_detail": [
        Check("GET", VIEW, CHANNEL),
        Check("POST", EDIT, CHANNEL, data=RENAME),
    ],
    "channel_test": [Check("POST", EDIT, CHANNEL)],
    "channel_secret": [Check("POST", EDIT, CHANNEL)],
    "channel_delete": [Check("POST", EDIT, CHANNEL)],
    "run_estimate_fragment": [Check("POST", VIEW, data=_run_form)],
    "evaluation_list": [Check("GET", VIEW, PROJECT)],
    "evaluation_new": [Check("POST", EDIT, data=_evaluation_form)],
    "evaluation_detail": [Check("GET", VIEW, EVALUATION)],
    "evaluation_edit": [
        Check("GET", EDIT, EVALUATION),
        Check("POST", EDIT, EVALUATION, data=_evaluation_form),
    ],
    "evaluation_run_now": [Check("POST", EDIT, EVALUATION)],
    "evaluation_sample": [Check("POST", EDIT, EVALUATION, data=_given({"items": 2}))],
    "evaluation_delete": [Check("POST", EDIT, EVALUATION)],
    "evaluation_schedule_add": [Check("POST", EDIT, EVALUATION, data=SCHEDULE)],
    "evaluation_schedule_remove": [
        Check("POST", EDIT, ("evaluation_id", "schedule_id"))
    ],
    "review_queue_list": [Check("GET", ACCOUNT, scoped=True)],
    "review_next": [Check("GET", VIEW, ("queue_id",))],
    "review_label": [Check("GET", OWNER, ("queue_id", "label_id"))],
    "run_judges": [Check("GET", VIEW, RUN)],
    "run_judges_thresholds": [Check("POST", MANAGE, RUN, data=THRESHOLDS_FORM)],
    "review_queue_new": [
        Check("GET", ACCOUNT),
        Check(
            "POST",
            EDIT,
            data=lambda w: {
                "run": w.run.pk,
                "name": "new",
                "source": "run",
                "raters": 1,
            },
        ),
    ],
    "review_agreement": [Check("GET", EDIT, ("queue_id",))],
    "review_save_dataset": [Check("POST", EDIT, ("queue_id",), data=_given({}))],
    "review_adjudicate": [
        Check("POST", EDIT, ("queue_id", "item_id"), data=SETTLE_FORM)
    ],
}

OPERATIONS: dict[tuple[str, str], list[Check]] = {
    ("POST", "/datasets"): [
        Check(
            "POST",
            EDIT,
            data=lambda w: {
                "project": w.project.pk,
                "name": "n",
                "items": [{"input": "x"}],
            },
        )
    ],
    ("GET", "/datasets"): [Check("GET", ACCOUNT, scoped=True)],
    ("POST", "/datasets/upload"): [Check("POST", EDIT, data=_upload)],
    ("POST", "/datasets/preview"): [Check("POST", EDIT, data=_upload)],
    ("GET", "/datasets/{dataset_id}"): [Check("GET", VIEW)],
    ("GET", "/datasets/{dataset_id}/items"): [Check("GET", VIEW)],
    ("POST", "/targets"): [Check("POST", EDIT, data=_new_in_project)],
    ("GET", "/targets"): [Check("GET", ACCOUNT, scoped=True)],
    ("GET", "/targets/kinds"): [Check("GET", ACCOUNT)],
    ("GET", "/targets/{target_id}"): [Check("GET", VIEW)],
    ("PATCH", "/targets/{target_id}"): [Check("PATCH", EDIT, data=RENAME)],
    ("DELETE", "/targets/{target_id}"): [Check("DELETE", EDIT)],
    ("POST", "/targets/{target_id}/try"): [Check("POST", EDIT, data=TRY)],
    ("POST", "/runs"): [
        Check(
            "POST",
            EDIT,
            data=lambda w: (
                {"dataset": w.dataset.pk, "scorers": ["exact_match"]}
                | {"target": w.target.pk}
            ),
        )
    ],
    ("GET", "/runs"): [Check("GET", ACCOUNT, scoped=True)],
    ("GET", "/runs/{run_id}"): [Check("GET", VIEW)],
    ("POST", "/runs/{run_id}/cancel"): [Check("POST", EDIT)],
    ("GET", "/runs/{run_id}/results"): [Check("GET", VIEW)],
    ("GET", "/runs/{run_id}/export"): [Check("GET", VIEW, query="?format=csv")],
    ("GET", "/runs/{run_id}/summary"): [Check("GET", VIEW)],
    ("GET", "/projects"): [Check("GET", ACCOUNT, scoped=True)],
    ("POST", "/projects"): [Check("POST", ACCOUNT, data=_given({"name": "Fresh"}))],
    ("GET", "/projects/{project_id}"): [Check("GET", VIEW)],
    ("GET", "/projects/{project_id}/members"): [Check("GET", VIEW)],
    ("POST", "/projects/{project_id}/members"): [Check("POST", MANAGE, data=INVITE)],
    ("PATCH", "/projects/{project_id}/members/{user_id}"): [
        Check("PATCH", MANAGE, data=PROMOTE)
    ],
    ("DELETE", "/projects/{project_id}/members/{user_id}"): [
        Check("DELETE", MANAGE, unlike=LEAVES)
    ],
    ("GET", "/keys"): [Check("GET", ACCOUNT)],
    ("POST", "/keys"): [Check("POST", ACCOUNT, data=_given({"name": "ci"}))],
    ("DELETE", "/keys/{key_id}"): [Check("DELETE", OWNER)],
    ("GET", "/scorers"): [Check("GET", ACCOUNT)],
    ("GET", "/tools"): [Check("GET", ACCOUNT)],
    ("GET", "/results/{result_id}/trajectory"): [Check("GET", VIEW)],
    ("GET", "/projects/{project_id}/secrets"): [Check("GET", VIEW)],
    ("PUT", "/projects/{project_id}/secrets/{name}"): [
        Check("PUT", MANAGE, data=_given({"value": "v-2"}))
    ],
    ("DELETE", "/projects/{project_id}/secrets/{name}"): [Check("DELETE", MANAGE)],
    ("GET", "/compare"): [Check("GET", VIEW, query=COMPARE)],
    ("GET", "/compare/items"): [Check("GET", VIEW, query=PAIR)],
    ("GET", "/leaderboard"): [Check("GET", VIEW, query=RANK)],
    ("GET", "/trajectories/diff"): [Check("GET", VIEW, query=DIFF)],
    ("GET", "/runs/{run_id}/failing-steps"): [Check("GET", VIEW)],
    ("GET", "/trajectories/compare"): [
        Check("GET", VIEW, query="?baseline={run_id}&candidate={run_id}")
    ],
    ("GET", "/plan"): [Check("GET", VIEW, query=PLAN)],
    ("GET", "/runs/{run_id}/clusters"): [
        Check("GET", VIEW),
        Check("GET", VIEW, query="?by=content"),
    ],
    ("GET", "/projects/{project_id}/embeddings"): [Check("GET", VIEW)],
    ("PUT", "/projects/{project_id}/embeddings"): [
        Check(
            "PUT",
            MANAGE,
            data=_given({"base_url": "https://api.example.com/v1", "model": "m"}),
        )
    ],
    ("DELETE", "/projects/{project_id}/embeddings"): [Check("DELETE", MANAGE)],
    ("POST", "/runs/{run_id}/retry"): [
        Check("POST", EDIT, data=_given({"statuses": ["failed"]}))
    ],
    ("POST", "/runs/{run_id}/resume"): [Check("POST", EDIT, data=_given({}))],
    ("POST", "/runs/{run_id}/rescore"): [Check("POST", EDIT, data=RESCORE)],
    ("GET", "/runs/{run_id}/scoring-passes"): [Check("GET", VIEW)],
    ("POST", "/otlp/v1/traces"): [Check("POST", EDIT, data=lambda w: _tool_span(w))],
    ("GET", "/alert-channels"): [Check("GET", ACCOUNT, scoped=True)],
    ("POST", "/alert-channels"): [
        Check(
            "POST",
            EDIT,
            data=lambda w: {
                "project": w.project.pk,
                "name": "more",
                "kind": "email",
                "emails": ["a@example.org"],
            },
        )
    ],
    ("GET", "/alert-channels/{channel_id}"): [Check("GET", VIEW)],
    ("PATCH", "/alert-channels/{channel_id}"): [Check("PATCH", EDIT, data=RENAME)],
    ("DELETE", "/alert-channels/{channel_id}"): [Check("DELETE", EDIT)],
    ("POST", "/alert-channels/{channel_id}/secret"): [Check("POST", EDIT)],
    ("POST", "/alert-channels/{channel_id}/test"): [Check("POST", EDIT)],
    ("GET", "/alert-channels/{channel_id}/deliveries"): [Check("GET", VIEW)],
    ("POST", "/runs/estimate"): [
        Check(
            "POST",
            VIEW,
            data=lambda w: {
                "dataset": w.dataset.pk,
                "target": w.target.pk,
                "scorers": ["exact_match"],
            },
        )
    ],
    ("GET", "/runs/{run_id}/judge-agreement"): [Check("GET", VIEW)],
    ("GET", "/projects/{project_id}/judge-calibration"): [Check("GET", VIEW)],
    ("PATCH", "/projects/{project_id}/judge-calibration"): [
        Check("PATCH", MANAGE, data=THRESHOLDS)
    ],
    ("POST", "/evaluations"): [Check("POST", EDIT, data=_new_evaluation)],
    ("GET", "/evaluations"): [Check("GET", ACCOUNT, scoped=True)],
    ("GET", "/evaluations/{evaluation_id}"): [Check("GET", VIEW)],
    ("PATCH", "/evaluations/{evaluation_id}"): [Check("PATCH", EDIT, data=RENAME)],
    ("DELETE", "/evaluations/{evaluation_id}"): [Check("DELETE", EDIT)],
    ("GET", "/evaluations/{evaluation_id}/history"): [Check("GET", VIEW)],
    ("POST", "/evaluations/{evaluation_id}/runs"): [
        Check("POST", EDIT, data=_given({}))
    ],
    ("POST", "/evaluations/{evaluation_id}/schedules"): [
        Check("POST", EDIT, data=SCHEDULE)
    ],
    ("DELETE", "/evaluations/{evaluation_id}/schedules/{schedule_id}"): [
        Check("DELETE", EDIT)
    ],
    ("GET", "/review-queues"): [Check("GET", ACCOUNT, scoped=True)],
    ("POST", "/review-queues"): [
        Check("POST", EDIT, data=lambda w: {"run": w.run.pk, "name": "new queue"})
    ],
    ("GET", "/review-queues/{queue_id}"): [Check("GET", VIEW)],
    ("PATCH", "/review-queues/{queue_id}"): [Check("PATCH", EDIT, data=RENOTE)],
    ("DELETE", "/review-queues/{queue_id}"): [Check("DELETE", EDIT)],
    ("POST", "/review-queues/{queue_id}/next"): [Check("POST", VIEW)],
    ("POST", "/review-queues/{queue_id}/labels"): [
        Check("POST", OWNER, data=_own_label)
    ],
    ("PUT", "/review-queues/{queue_id}/labels/{label_id}"): [
        Check("PUT", OWNER, data=_given({"value": "fail"}))
    ],
    ("GET", "/review-queues/{queue_id}/matrix"): [Check("GET", EDIT)],
    ("GET", "/review-queues/{queue_id}/agreement"): [Check("GET", EDIT)],
    ("POST", "/review-queues/{queue_id}/dataset"): [
        Check("POST", EDIT, data=_given({}))
    ],
    ("POST", "/review-queues/{queue_id}/items/{item_id}/adjudication"): [
        Check("POST", EDIT, data=SETTLE)
    ],
    ("DELETE", "/review-queues/{queue_id}/items/{item_id}/adjudication"): [
        Check("DELETE", EDIT)
    ],
}


# -- the declarations cover the site -------------------------------------------------


def _url_names(
    patterns: list[URLPattern | URLResolver], namespace: str | None = None
) -> Iterator[tuple[str | None, str]]:
    """Each page's namespace and name; a page without a name by its route, so
    that it cannot slip past the declarations."""
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            yield from _url_names(pattern.url_patterns, pattern.namespace or namespace)
        else:
            yield namespace, pattern.name or str(pattern.pattern)


def test_every_page_is_declared() -> None:
    names = {
        name for ns, name in _url_names(get_resolver().url_patterns) if ns == "runs"
    }
    missing = sorted(names - PAGES.keys())
    stale = sorted(PAGES.keys() - names)
    assert not missing, f"pages without persona checks in PAGES: {missing}"
    assert not stale, f"PAGES names URLs that no longer exist: {stale}"


def test_every_api_operation_is_declared() -> None:
    operations = {
        (method.upper(), path.removeprefix(API))
        for path, methods in api.get_openapi_schema()["paths"].items()
        for method in methods
    }
    missing = sorted(operations - OPERATIONS.keys())
    stale = sorted(OPERATIONS.keys() - operations)
    assert not missing, f"API operations without persona checks: {missing}"
    assert not stale, f"OPERATIONS names operations that no longer exist: {stale}"


# -- each declaration, tried by each persona ----------------------------------------


class QuietLauncher:
    """Records what would be launched: the checks are about who gets through,
    and a run executed on the launcher's thread would outlive the test's
    transaction."""

    def __init__(self) -> None:
        self.tasks: dict[int, Any] = {}
        self.passes: dict[int, Any] = {}

    def launch(self, run_id: int) -> None:
        pass

    def cancel(self, run_id: int) -> None:
        pass

    def launch_scoring_pass(self, pass_id: int) -> None:
        pass


@pytest.fixture
def world(
    alice: User,
    bob: User,
    victor: User,
    mallory: User,
    project: Project,
    other_project: Project,
    dataset: Dataset,
    monkeypatch: pytest.MonkeyPatch,
    settings: Any,
    tmp_path: Any,
) -> World:
    settings.EVALSITE_EXECUTOR = "local"
    settings.DATA_DIR = tmp_path
    monkeypatch.setattr(launchers, "_launcher", QuietLauncher())
    target = Target.objects.create(
        project=project,
        name="Demo model",
        kind="demo",
        config={"min_latency_ms": 0, "max_latency_ms": 0, "transient_error_rate": 0},
    )
    run = echo_run(dataset)
    outcome = {"scores": [("exact_match", True, "")]}
    failure = {"error": ("http", "HTTPError", "502")}
    run = store_outcomes(run, [outcome] * 9 + [failure])
    Run.objects.filter(pk=run.pk).update(
        status=RunStatus.COMPLETED_WITH_ERRORS, finished_at=timezone.now()
    )
    run.refresh_from_db()
    store.secret_set(
        project=project, user=alice, name="API_TOKEN", value="v-1", hosts=["a.org"]
    )
    key, _ = api_key_create(user=bob, name="laptop")
    channel = channel_create(
        project=project,
        user=bob,
        name="hook",
        kind="webhook",
        url="https://hooks.example.org/evalsite",
    ).channel
    evaluation = evaluation_create(
        user=bob,
        project=project,
        name="nightly",
        dataset=dataset,
        target=target,
        scorers=["exact_match"],
    )
    schedule = Schedule.objects.create(
        evaluation=evaluation, cron="0 3 * * *", last_tick_at=timezone.now()
    )
    staged = staging.upload_stage(
        user=bob,
        project=project,
        upload=_jsonl(),
        name="staged",
        format=None,
        description="",
    )
    queue = queue_create(user=alice, run=run, name="coverage", raters=5)
    label = label_next(user=bob, queue=queue)
    assert label is not None
    return World(
        project=project,
        dataset=dataset,
        target=target,
        run=run,
        result=Result.objects.filter(run=run).earliest("pk"),
        users={"alice": alice, "bob": bob, "victor": victor, "mallory": mallory},
        key_id=key.pk,
        token=staged.token,
        channel_id=channel.pk,
        evaluation_id=evaluation.pk,
        schedule_id=schedule.pk,
        queue_id=queue.pk,
        label_id=label.pk,
        item_id=label.review_item_id,
    )


def expected(check: Check, persona: str) -> str:
    if persona == "anonymous":
        return LOGIN
    if persona in check.unlike:
        return check.unlike[persona]
    if check.need == ACCOUNT:
        return THROUGH
    if check.need == OWNER:
        return THROUGH if persona == OWNER_NAME else HIDDEN
    role = PERSONAS[persona]
    if role is None:
        return HIDDEN
    return THROUGH if role in LETS_THROUGH[check.need] else FORBIDDEN


def outcome(response: HttpResponse, *, is_api: bool) -> str:
    status = response.status_code
    if is_api and status == 401:
        return LOGIN
    if status == 302 and response["Location"].startswith(reverse("login")):
        return LOGIN
    if status == 404:
        return HIDDEN
    if status == 403:
        return FORBIDDEN
    assert status < 500, status
    return THROUGH


def _send(client: Client, check: Check, url: str, w: World, *, is_api: bool) -> Any:
    url += check.query.format(**_ids(w))
    data = check.data(w) if check.data else None
    if check.method == "GET":
        return client.get(url)
    multipart = data is not None and any(
        isinstance(value, SimpleUploadedFile) for value in data.values()
    )
    if not is_api or multipart:
        assert check.method == "POST", "pages and uploads take POST"
        return client.post(url, data or {})
    return client.generic(
        check.method,
        url,
        json.dumps(data if data is not None else {}),
        content_type="application/json",
    )


def _url(where: str, check: Check, w: World, *, is_api: bool) -> str:
    ids = _ids(w)
    if is_api:
        return API + where.format(**ids)
    return reverse(f"runs:{where}", args=[ids[name] for name in check.args])


def _shows(response: HttpResponse, project: Project) -> bool:
    return project.name in response.content.decode()


def _cases() -> Iterator[Any]:
    for name, checks in PAGES.items():
        for n, check in enumerate(checks):
            yield pytest.param(name, check, False, id=f"page:{name}:{n}:{check.method}")
    for (method, path), checks in OPERATIONS.items():
        for n, check in enumerate(checks):
            yield pytest.param(path, check, True, id=f"api:{method} {path}:{n}")


@pytest.mark.parametrize(("where", "check", "is_api"), list(_cases()))
def test_each_persona_gets_what_the_need_says(
    world: World, where: str, check: Check, is_api: bool
) -> None:
    url = _url(where, check, world, is_api=is_api)
    answers, leaks = {}, []
    for persona in PERSONAS:
        client = Client()
        if persona != "anonymous":
            client.force_login(world.users[persona])
        # Each persona meets the same world: what one changed is rolled back,
        # and no page cached for one is served to the next.
        caches["default"].clear()
        with transaction.atomic():
            response = _send(client, check, url, world, is_api=is_api)
            transaction.set_rollback(True)
        answers[persona] = outcome(response, is_api=is_api)
        if check.scoped and persona == "mallory" and _shows(response, world.project):
            leaks.append(persona)

    wrong = {
        persona: f"got {answers[persona]}, expected {expected(check, persona)}"
        for persona in PERSONAS
        if answers[persona] != expected(check, persona)
    }
    assert not wrong, wrong
    assert not leaks, "an outsider's list shows the project"
