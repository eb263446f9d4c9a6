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

from runs.api import api
from runs.datasets.importers import staging
from runs.executor import launchers
from runs.models import Dataset, Project, Result, Run, RunStatus, Target
from runs.projects.services import api_key_create
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


Build = Callable[[World], Any]


@dataclass(frozen=True)
class Check:
    method: str
    need: str
    url: Build
    data: Build | None = None
    # A persona whose answer differs from the need's, with the reason.
    unlike: dict[str, str] = field(default_factory=dict)
    # A list: an outsider gets it, without the project's objects in it.
    scoped: bool = False


def _jsonl(_: World | None) -> SimpleUploadedFile:
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


def _run_url(name: str) -> Build:
    return lambda w: reverse(f"runs:{name}", args=[w.run.pk])


def _compare_query(w: World) -> str:
    return f"?baseline={w.run.pk}&candidates={w.run.pk}"


# Leaving a project needs only membership: victor may remove himself.
LEAVES = {"victor": THROUGH}

PAGES: dict[str, list[Check]] = {
    "run_list": [
        Check("GET", ACCOUNT, lambda w: reverse("runs:run_list"), scoped=True)
    ],
    "run_new": [Check("POST", EDIT, lambda w: reverse("runs:run_new"), _run_form)],
    "run_detail": [Check("GET", VIEW, _run_url("run_detail"))],
    "run_cancel": [Check("POST", EDIT, _run_url("run_cancel"))],
    "result_detail": [
        Check(
            "GET",
            VIEW,
            lambda w: reverse("runs:result_detail", args=[w.run.pk, w.result.pk]),
        )
    ],
    "run_export": [
        Check("GET", VIEW, lambda w: reverse("runs:run_export", args=[w.run.pk, "csv"]))
    ],
    "run_demo_start": [Check("POST", EDIT, lambda w: reverse("runs:run_demo_start"))],
    "dataset_list": [
        Check("GET", ACCOUNT, lambda w: reverse("runs:dataset_list"), scoped=True)
    ],
    "dataset_upload": [
        Check(
            "POST",
            EDIT,
            lambda w: reverse("runs:dataset_upload"),
            lambda w: {"project": w.project.pk, "name": "extra", "file": _jsonl(w)},
        )
    ],
    "dataset_upload_map": [
        Check(
            "GET", OWNER, lambda w: reverse("runs:dataset_upload_map", args=[w.token])
        )
    ],
    "dataset_detail": [
        Check(
            "GET", VIEW, lambda w: reverse("runs:dataset_detail", args=[w.dataset.pk])
        )
    ],
    "target_list": [
        Check(
            "POST",
            EDIT,
            lambda w: reverse("runs:target_list"),
            lambda w: {"project": w.project.pk, "name": "new", "kind": "demo"},
        )
    ],
    "target_detail": [
        Check("GET", VIEW, lambda w: reverse("runs:target_detail", args=[w.target.pk])),
        Check(
            "POST",
            EDIT,
            lambda w: reverse("runs:target_detail", args=[w.target.pk]),
            lambda w: {"name": "renamed"},
        ),
    ],
    "target_delete": [
        Check("POST", EDIT, lambda w: reverse("runs:target_delete", args=[w.target.pk]))
    ],
    "target_try": [
        Check(
            "POST",
            EDIT,
            lambda w: reverse("runs:target_try", args=[w.target.pk]),
            lambda w: {"input": "1 + 1"},
        )
    ],
    "project_list": [
        Check("GET", ACCOUNT, lambda w: reverse("runs:project_list"), scoped=True)
    ],
    "project_detail": [
        Check(
            "GET", VIEW, lambda w: reverse("runs:project_detail", args=[w.project.pk])
        )
    ],
    "project_member_add": [
        Check(
            "POST",
            MANAGE,
            lambda w: reverse("runs:project_member_add", args=[w.project.pk]),
            lambda w: {"user": "mallory", "role": "viewer"},
        )
    ],
    "project_member_update": [
        Check(
            "POST",
            MANAGE,
            lambda w: reverse(
                "runs:project_member_update",
                args=[w.project.pk, w.users["victor"].pk],
            ),
            lambda w: {"role": "editor"},
        )
    ],
    "project_member_remove": [
        Check(
            "POST",
            MANAGE,
            lambda w: reverse(
                "runs:project_member_remove",
                args=[w.project.pk, w.users["victor"].pk],
            ),
            unlike=LEAVES,
        )
    ],
    "account_keys": [Check("GET", ACCOUNT, lambda w: reverse("runs:account_keys"))],
    "account_key_revoke": [
        Check(
            "POST", OWNER, lambda w: reverse("runs:account_key_revoke", args=[w.key_id])
        )
    ],
    "project_secrets": [
        Check(
            "GET", VIEW, lambda w: reverse("runs:project_secrets", args=[w.project.pk])
        ),
        Check(
            "POST",
            MANAGE,
            lambda w: reverse("runs:project_secrets", args=[w.project.pk]),
            lambda w: {"name": "OTHER", "value": "v-123", "hosts": "api.example.org"},
        ),
    ],
    "project_secret_delete": [
        Check(
            "POST",
            MANAGE,
            lambda w: reverse(
                "runs:project_secret_delete", args=[w.project.pk, w.secret]
            ),
        )
    ],
    "catalogue": [Check("GET", ACCOUNT, lambda w: reverse("runs:catalogue"))],
    "compare": [
        Check("GET", VIEW, lambda w: reverse("runs:compare") + _compare_query(w))
    ],
    "compare_items_csv": [
        Check(
            "GET",
            VIEW,
            lambda w: (
                reverse("runs:compare_items_csv")
                + f"?baseline={w.run.pk}&candidate={w.run.pk}&scorer=exact_match"
            ),
        )
    ],
    "run_compare_choices": [Check("GET", VIEW, _run_url("run_compare_choices"))],
    "run_clusters": [Check("GET", VIEW, _run_url("run_clusters"))],
    "run_cluster_save": [
        Check(
            "POST",
            EDIT,
            _run_url("run_cluster_save"),
            lambda w: {"cluster": "none", "name": "from-cluster"},
        )
    ],
    "run_retry": [
        Check("GET", EDIT, _run_url("run_retry")),
        Check("POST", EDIT, _run_url("run_retry"), lambda w: {"status": "failed"}),
    ],
    "run_resume": [Check("POST", EDIT, _run_url("run_resume"))],
    "run_rescore": [
        Check("GET", EDIT, _run_url("run_rescore")),
        Check(
            "POST", EDIT, _run_url("run_rescore"), lambda w: {"scorers": ["numeric"]}
        ),
    ],
    "run_scoring_passes": [Check("GET", VIEW, _run_url("run_scoring_passes"))],
}


def _api(path: str) -> Callable[[Callable[[World], dict[str, Any]]], Build]:
    return lambda ids: lambda w: API + path.format(**ids(w))


def _run_ids(w: World) -> dict[str, Any]:
    return {"run_id": w.run.pk}


def _project_ids(w: World) -> dict[str, Any]:
    return {
        "project_id": w.project.pk,
        "user_id": w.users["victor"].pk,
        "name": w.secret,
    }


def _target_ids(w: World) -> dict[str, Any]:
    return {"target_id": w.target.pk}


def _dataset_ids(w: World) -> dict[str, Any]:
    return {"dataset_id": w.dataset.pk}


def _none(w: World) -> dict[str, Any]:
    return {}


def _upload(w: World) -> dict[str, Any]:
    return {"project": w.project.pk, "file": _jsonl(w)}


OPERATIONS: dict[tuple[str, str], list[Check]] = {
    ("POST", "/datasets"): [
        Check(
            "POST",
            EDIT,
            _api("/datasets")(_none),
            lambda w: {
                "project": w.project.pk,
                "name": "new",
                "items": [{"input": "x"}],
            },
        )
    ],
    ("GET", "/datasets"): [
        Check("GET", ACCOUNT, _api("/datasets")(_none), scoped=True)
    ],
    ("POST", "/datasets/upload"): [
        Check("POST", EDIT, _api("/datasets/upload")(_none), _upload)
    ],
    ("POST", "/datasets/preview"): [
        Check("POST", EDIT, _api("/datasets/preview")(_none), _upload)
    ],
    ("GET", "/datasets/{dataset_id}"): [
        Check("GET", VIEW, _api("/datasets/{dataset_id}")(_dataset_ids))
    ],
    ("GET", "/datasets/{dataset_id}/items"): [
        Check("GET", VIEW, _api("/datasets/{dataset_id}/items")(_dataset_ids))
    ],
    ("POST", "/targets"): [
        Check(
            "POST",
            EDIT,
            _api("/targets")(_none),
            lambda w: {"project": w.project.pk, "name": "new", "kind": "demo"},
        )
    ],
    ("GET", "/targets"): [Check("GET", ACCOUNT, _api("/targets")(_none), scoped=True)],
    ("GET", "/targets/kinds"): [Check("GET", ACCOUNT, _api("/targets/kinds")(_none))],
    ("GET", "/targets/{target_id}"): [
        Check("GET", VIEW, _api("/targets/{target_id}")(_target_ids))
    ],
    ("PATCH", "/targets/{target_id}"): [
        Check(
            "PATCH",
            EDIT,
            _api("/targets/{target_id}")(_target_ids),
            lambda w: {"name": "renamed"},
        )
    ],
    ("DELETE", "/targets/{target_id}"): [
        Check("DELETE", EDIT, _api("/targets/{target_id}")(_target_ids))
    ],
    ("POST", "/targets/{target_id}/try"): [
        Check(
            "POST",
            EDIT,
            _api("/targets/{target_id}/try")(_target_ids),
            lambda w: {"input": "1 + 1"},
        )
    ],
    ("POST", "/runs"): [
        Check(
            "POST",
            EDIT,
            _api("/runs")(_none),
            lambda w: {
                "dataset": w.dataset.pk,
                "target": w.target.pk,
                "scorers": ["exact_match"],
            },
        )
    ],
    ("GET", "/runs"): [Check("GET", ACCOUNT, _api("/runs")(_none), scoped=True)],
    ("GET", "/runs/{run_id}"): [Check("GET", VIEW, _api("/runs/{run_id}")(_run_ids))],
    ("POST", "/runs/{run_id}/cancel"): [
        Check("POST", EDIT, _api("/runs/{run_id}/cancel")(_run_ids))
    ],
    ("GET", "/runs/{run_id}/results"): [
        Check("GET", VIEW, _api("/runs/{run_id}/results")(_run_ids))
    ],
    ("GET", "/runs/{run_id}/export"): [
        Check("GET", VIEW, _api("/runs/{run_id}/export?format=csv")(_run_ids))
    ],
    ("GET", "/runs/{run_id}/summary"): [
        Check("GET", VIEW, _api("/runs/{run_id}/summary")(_run_ids))
    ],
    ("GET", "/projects"): [
        Check("GET", ACCOUNT, _api("/projects")(_none), scoped=True)
    ],
    ("POST", "/projects"): [
        Check("POST", ACCOUNT, _api("/projects")(_none), lambda w: {"name": "Fresh"})
    ],
    ("GET", "/projects/{project_id}"): [
        Check("GET", VIEW, _api("/projects/{project_id}")(_project_ids))
    ],
    ("GET", "/projects/{project_id}/members"): [
        Check("GET", VIEW, _api("/projects/{project_id}/members")(_project_ids))
    ],
    ("POST", "/projects/{project_id}/members"): [
        Check(
            "POST",
            MANAGE,
            _api("/projects/{project_id}/members")(_project_ids),
            lambda w: {"user": "mallory", "role": "viewer"},
        )
    ],
    ("PATCH", "/projects/{project_id}/members/{user_id}"): [
        Check(
            "PATCH",
            MANAGE,
            _api("/projects/{project_id}/members/{user_id}")(_project_ids),
            lambda w: {"role": "editor"},
        )
    ],
    ("DELETE", "/projects/{project_id}/members/{user_id}"): [
        Check(
            "DELETE",
            MANAGE,
            _api("/projects/{project_id}/members/{user_id}")(_project_ids),
            unlike=LEAVES,
        )
    ],
    ("GET", "/keys"): [Check("GET", ACCOUNT, _api("/keys")(_none))],
    ("POST", "/keys"): [
        Check("POST", ACCOUNT, _api("/keys")(_none), lambda w: {"name": "ci"})
    ],
    ("DELETE", "/keys/{key_id}"): [
        Check("DELETE", OWNER, lambda w: f"{API}/keys/{w.key_id}")
    ],
    ("GET", "/scorers"): [Check("GET", ACCOUNT, _api("/scorers")(_none))],
    ("GET", "/projects/{project_id}/secrets"): [
        Check("GET", VIEW, _api("/projects/{project_id}/secrets")(_project_ids))
    ],
    ("PUT", "/projects/{project_id}/secrets/{name}"): [
        Check(
            "PUT",
            MANAGE,
            _api("/projects/{project_id}/secrets/{name}")(_project_ids),
            lambda w: {"value": "v-456"},
        )
    ],
    ("DELETE", "/projects/{project_id}/secrets/{name}"): [
        Check(
            "DELETE",
            MANAGE,
            _api("/projects/{project_id}/secrets/{name}")(_project_ids),
        )
    ],
    ("GET", "/compare"): [
        Check("GET", VIEW, lambda w: f"{API}/compare" + _compare_query(w))
    ],
    ("GET", "/compare/items"): [
        Check(
            "GET",
            VIEW,
            lambda w: (
                f"{API}/compare/items?baseline={w.run.pk}"
                f"&candidate={w.run.pk}&scorer=exact_match"
            ),
        )
    ],
    ("GET", "/runs/{run_id}/clusters"): [
        Check("GET", VIEW, _api("/runs/{run_id}/clusters")(_run_ids))
    ],
    ("POST", "/runs/{run_id}/retry"): [
        Check(
            "POST",
            EDIT,
            _api("/runs/{run_id}/retry")(_run_ids),
            lambda w: {"statuses": ["failed"]},
        )
    ],
    ("POST", "/runs/{run_id}/resume"): [
        Check("POST", EDIT, _api("/runs/{run_id}/resume")(_run_ids), lambda w: {})
    ],
    ("POST", "/runs/{run_id}/rescore"): [
        Check(
            "POST",
            EDIT,
            _api("/runs/{run_id}/rescore")(_run_ids),
            lambda w: {"scorers": ["numeric"]},
        )
    ],
    ("GET", "/runs/{run_id}/scoring-passes"): [
        Check("GET", VIEW, _api("/runs/{run_id}/scoring-passes")(_run_ids))
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
    staged = staging.upload_stage(
        user=bob,
        project=project,
        upload=_jsonl(None),
        name="staged",
        format=None,
        description="",
    )
    return World(
        project=project,
        dataset=dataset,
        target=target,
        run=run,
        result=Result.objects.filter(run=run).earliest("pk"),
        users={"alice": alice, "bob": bob, "victor": victor, "mallory": mallory},
        key_id=key.pk,
        token=staged.token,
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


def _send(client: Client, check: Check, w: World, *, is_api: bool) -> Any:
    url = check.url(w)
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


def _shows(response: HttpResponse, project: Project) -> bool:
    return project.name in response.content.decode()


def _cases() -> Iterator[Any]:
    for name, checks in PAGES.items():
        for n, check in enumerate(checks):
            yield pytest.param(check, False, id=f"page:{name}:{n}:{check.method}")
    for (method, path), checks in OPERATIONS.items():
        for n, check in enumerate(checks):
            yield pytest.param(check, True, id=f"api:{method} {path}:{n}")


@pytest.mark.parametrize(("check", "is_api"), list(_cases()))
def test_each_persona_gets_what_the_need_says(
    world: World, check: Check, is_api: bool
) -> None:
    answers, leaks = {}, []
    for persona in PERSONAS:
        client = Client()
        if persona != "anonymous":
            client.force_login(world.users[persona])
        # Each persona meets the same world: what one changed is rolled back,
        # and no page cached for one is served to the next.
        caches["default"].clear()
        with transaction.atomic():
            response = _send(client, check, world, is_api=is_api)
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
