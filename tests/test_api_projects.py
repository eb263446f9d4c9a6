"""/api/v1/projects, members, /api/v1/keys, and editing, deleting and trying
a target through the API."""

from __future__ import annotations

import json
import socket

import pytest
from django.contrib.auth.models import User
from django.test import Client

from runs.models import ApiKey, Dataset, Membership, Project, Run, Target
from runs.projects.services import api_key_create
from runs.results.services import run_create
from runs.targets.services import target_create
from runs.testing.fake_openai import FakeOpenAIServer

pytestmark = pytest.mark.django_db

API = "/api/v1"
JSON = "application/json"


def _role(project: Project, user: User) -> str | None:
    return (
        Membership.objects.filter(project=project, user=user)
        .values_list("role", flat=True)
        .first()
    )


def _bearer(user: User) -> dict[str, str]:
    _, plain = api_key_create(user=user, name="test")
    return {"HTTP_AUTHORIZATION": f"Bearer {plain}"}


@pytest.fixture
def target(project: Project, alice: User) -> Target:
    return target_create(
        project=project,
        user=alice,
        name="local",
        kind="openai_chat",
        config={"base_url": "http://127.0.0.1:9/v1", "model": "m-1"},
    )


# -- projects -----------------------------------------------------------------


def test_list_projects_gives_the_users_projects_with_role(
    bob_client: Client, project: Project, other_project: Project
) -> None:
    body = bob_client.get(f"{API}/projects").json()

    assert body["count"] == 1
    assert [(p["name"], p["role"], p["member_count"]) for p in body["items"]] == [
        ("Research", "editor", 3)
    ]


def test_create_project_makes_the_caller_admin(client: Client, mallory: User) -> None:
    response = client.post(
        f"{API}/projects",
        {"name": "Lab", "description": "d"},
        content_type=JSON,
        **_bearer(mallory),
    )

    assert response.status_code == 201
    body = response.json()
    assert (body["name"], body["role"], body["member_count"]) == ("Lab", "admin", 1)
    assert _role(Project.objects.get(name="Lab"), mallory) == "admin"


def test_create_project_with_a_taken_name_is_a_conflict(
    alice_client: Client, project: Project
) -> None:
    response = alice_client.post(
        f"{API}/projects", {"name": "Research"}, content_type=JSON
    )

    assert response.status_code == 409
    assert Project.objects.count() == 1


def test_create_project_with_a_blank_name_names_the_field(
    alice_client: Client,
) -> None:
    response = alice_client.post(f"{API}/projects", {"name": "  "}, content_type=JSON)

    assert response.status_code == 400
    assert response.json()["field"] == "name"
    assert not Project.objects.exists()


def test_get_project(victor_client: Client, project: Project) -> None:
    body = victor_client.get(f"{API}/projects/{project.pk}").json()

    assert (body["id"], body["role"]) == (project.pk, "viewer")


def test_outsider_gets_404_for_the_project_and_its_members(
    mallory_client: Client, project: Project
) -> None:
    assert mallory_client.get(f"{API}/projects/{project.pk}").status_code == 404
    members = mallory_client.get(f"{API}/projects/{project.pk}/members")
    assert members.status_code == 404


@pytest.mark.parametrize(
    "path", ["/projects", "/projects/1", "/projects/1/members", "/keys"]
)
def test_anonymous_gets_401(client: Client, project: Project, path: str) -> None:
    assert client.get(API + path).status_code == 401


# -- members ------------------------------------------------------------------


def test_members_are_listed_admins_first(
    victor_client: Client, project: Project, alice: User
) -> None:
    body = victor_client.get(f"{API}/projects/{project.pk}/members").json()

    assert [(m["username"], m["role"]) for m in body["items"]] == [
        ("alice", "admin"),
        ("bob", "editor"),
        ("victor", "viewer"),
    ]
    assert body["items"][0]["user"] == alice.pk


def test_admin_adds_a_member_by_email(
    alice_client: Client, project: Project, mallory: User
) -> None:
    response = alice_client.post(
        f"{API}/projects/{project.pk}/members",
        {"user": "mallory@example.org", "role": "viewer"},
        content_type=JSON,
    )

    assert response.status_code == 201
    assert response.json()["username"] == "mallory"
    assert _role(project, mallory) == "viewer"


def test_adding_an_unknown_user_is_a_400_naming_the_field(
    alice_client: Client, project: Project
) -> None:
    response = alice_client.post(
        f"{API}/projects/{project.pk}/members", {"user": "ghost"}, content_type=JSON
    )

    assert response.status_code == 400
    assert response.json()["field"] == "user"


def test_adding_a_member_twice_is_a_conflict(
    alice_client: Client, project: Project
) -> None:
    response = alice_client.post(
        f"{API}/projects/{project.pk}/members", {"user": "bob"}, content_type=JSON
    )

    assert response.status_code == 409


@pytest.mark.parametrize(
    ("persona", "status"), [("bob_client", 403), ("victor_client", 403)]
)
def test_non_admins_cannot_add_members(
    request: pytest.FixtureRequest,
    project: Project,
    mallory: User,
    persona: str,
    status: int,
) -> None:
    response = request.getfixturevalue(persona).post(
        f"{API}/projects/{project.pk}/members", {"user": "mallory"}, content_type=JSON
    )

    assert response.status_code == status
    assert _role(project, mallory) is None


def test_outsider_cannot_add_herself(
    mallory_client: Client, project: Project, mallory: User
) -> None:
    response = mallory_client.post(
        f"{API}/projects/{project.pk}/members",
        {"user": "mallory", "role": "admin"},
        content_type=JSON,
    )

    assert response.status_code == 404
    assert _role(project, mallory) is None


def test_admin_changes_a_role(
    alice_client: Client, project: Project, victor: User
) -> None:
    response = alice_client.patch(
        f"{API}/projects/{project.pk}/members/{victor.pk}",
        {"role": "editor"},
        content_type=JSON,
    )

    assert response.status_code == 200
    assert response.json()["role"] == "editor"
    assert _role(project, victor) == "editor"


def test_the_last_admin_cannot_be_demoted(
    alice_client: Client, project: Project, alice: User
) -> None:
    response = alice_client.patch(
        f"{API}/projects/{project.pk}/members/{alice.pk}",
        {"role": "editor"},
        content_type=JSON,
    )

    assert response.status_code == 400
    assert "last admin" in response.json()["detail"]
    assert _role(project, alice) == "admin"


def test_a_viewer_cannot_change_roles(
    victor_client: Client, project: Project, victor: User
) -> None:
    response = victor_client.patch(
        f"{API}/projects/{project.pk}/members/{victor.pk}",
        {"role": "admin"},
        content_type=JSON,
    )

    assert response.status_code == 403
    assert _role(project, victor) == "viewer"


def test_changing_a_non_member_is_not_found(
    alice_client: Client, project: Project, mallory: User
) -> None:
    response = alice_client.patch(
        f"{API}/projects/{project.pk}/members/{mallory.pk}",
        {"role": "viewer"},
        content_type=JSON,
    )

    assert response.status_code == 404


def test_admin_removes_a_member(
    alice_client: Client, project: Project, bob: User
) -> None:
    response = alice_client.delete(f"{API}/projects/{project.pk}/members/{bob.pk}")

    assert response.status_code == 204
    assert _role(project, bob) is None


def test_the_last_admin_cannot_be_removed(
    alice_client: Client, project: Project, alice: User
) -> None:
    response = alice_client.delete(f"{API}/projects/{project.pk}/members/{alice.pk}")

    assert response.status_code == 400
    assert _role(project, alice) == "admin"


def test_a_viewer_may_leave_but_not_remove_others(
    victor_client: Client, project: Project, victor: User, bob: User
) -> None:
    other = victor_client.delete(f"{API}/projects/{project.pk}/members/{bob.pk}")
    own = victor_client.delete(f"{API}/projects/{project.pk}/members/{victor.pk}")

    assert (other.status_code, own.status_code) == (403, 204)
    assert _role(project, bob) == "editor"
    assert _role(project, victor) is None


def test_outsider_cannot_remove_members(
    mallory_client: Client, project: Project, bob: User
) -> None:
    response = mallory_client.delete(f"{API}/projects/{project.pk}/members/{bob.pk}")

    assert response.status_code == 404
    assert _role(project, bob) == "editor"


# -- keys ---------------------------------------------------------------------


def test_create_key_returns_the_plain_key_once(
    alice_client: Client, alice: User, dataset: Dataset
) -> None:
    response = alice_client.post(f"{API}/keys", {"name": "ci"}, content_type=JSON)

    assert response.status_code == 201
    body = response.json()
    plain = body["key"]
    assert body["name"] == "ci" and body["active"] is True
    assert "no-store" in response["Cache-Control"]
    assert plain.startswith(f"evk_{body['prefix']}_")
    listed = alice_client.get(f"{API}/keys").json()["items"]
    assert [k["id"] for k in listed] == [body["id"]]
    assert "key" not in listed[0] and plain not in str(listed)
    assert "key_hash" not in listed[0]
    using = Client().get(f"{API}/datasets", HTTP_AUTHORIZATION=f"Bearer {plain}")
    assert using.status_code == 200


def test_a_key_cannot_create_keys(client: Client, alice: User) -> None:
    response = client.post(
        f"{API}/keys", {"name": "more"}, content_type=JSON, **_bearer(alice)
    )

    assert response.status_code == 403
    assert ApiKey.objects.filter(user=alice).count() == 1


def test_keys_list_shows_only_the_callers_keys(
    client: Client, alice: User, mallory: User
) -> None:
    api_key_create(user=mallory, name="hers")

    body = client.get(f"{API}/keys", **_bearer(alice)).json()

    assert [k["name"] for k in body["items"]] == ["test"]


def test_revoked_key_is_refused_at_once(client: Client, alice: User) -> None:
    key, plain = api_key_create(user=alice, name="doomed")
    bearer = {"HTTP_AUTHORIZATION": f"Bearer {plain}"}
    assert client.get(f"{API}/projects", **bearer).status_code == 200

    response = client.delete(f"{API}/keys/{key.pk}", **bearer)

    assert response.status_code == 204
    assert client.get(f"{API}/projects", **bearer).status_code == 401
    key.refresh_from_db()
    assert key.revoked_at is not None


def test_revoking_another_users_key_is_not_found(
    mallory_client: Client, alice: User
) -> None:
    key, _ = api_key_create(user=alice, name="hers")

    response = mallory_client.delete(f"{API}/keys/{key.pk}")

    assert response.status_code == 404
    key.refresh_from_db()
    assert key.revoked_at is None


# -- targets: edit, delete, try ------------------------------------------------


def test_editor_patches_a_target(bob_client: Client, target: Target) -> None:
    response = bob_client.patch(
        f"{API}/targets/{target.pk}",
        {"name": "renamed", "config": {"base_url": "http://x/v1", "model": "m-2"}},
        content_type=JSON,
    )

    assert response.status_code == 200
    body = response.json()
    assert (body["name"], body["config"]["model"]) == ("renamed", "m-2")
    target.refresh_from_db()
    assert target.config["prompt_template"] == "{input}"  # cleaned as on creation


def test_patch_validates_the_config(bob_client: Client, target: Target) -> None:
    response = bob_client.patch(
        f"{API}/targets/{target.pk}",
        {"config": {"base_url": "http://x/v1", "model": "m", "api_key": "sk-1"}},
        content_type=JSON,
    )

    assert response.status_code == 400
    assert response.json()["field"] == "config.api_key"
    assert "sk-1" not in response.content.decode()


def test_patch_to_a_taken_name_is_a_conflict(
    bob_client: Client, target: Target, project: Project, alice: User
) -> None:
    target_create(project=project, user=alice, name="other", kind="demo", config={})

    response = bob_client.patch(
        f"{API}/targets/{target.pk}", {"name": "other"}, content_type=JSON
    )

    assert response.status_code == 409


@pytest.mark.parametrize(
    ("persona", "status"), [("victor_client", 403), ("mallory_client", 404)]
)
def test_viewer_and_outsider_cannot_patch_delete_or_try(
    request: pytest.FixtureRequest, target: Target, persona: str, status: int
) -> None:
    client = request.getfixturevalue(persona)
    url = f"{API}/targets/{target.pk}"

    patch = client.patch(url, {"name": "x"}, content_type=JSON)
    delete = client.delete(url)
    tried = client.post(f"{url}/try", {"input": "hi"}, content_type=JSON)

    assert (patch.status_code, delete.status_code, tried.status_code) == (
        status,
        status,
        status,
    )
    assert Target.objects.filter(pk=target.pk, name="local").exists()


def test_delete_target_keeps_its_runs(
    bob_client: Client, target: Target, dataset: Dataset, bob: User
) -> None:
    run = run_create(
        user=bob, dataset=dataset, target=target, scorers=["exact_match"], launch=False
    )

    response = bob_client.delete(f"{API}/targets/{target.pk}")

    assert response.status_code == 204
    body = bob_client.get(f"{API}/runs/{run.pk}").json()
    assert body["target"] is None
    assert (body["target_name"], body["target_kind"]) == ("local", "openai_chat")
    assert body["target_config"]["model"] == "m-1"
    assert Run.objects.filter(pk=run.pk).exists()


def test_try_answers_through_the_real_endpoint(
    bob_client: Client, target: Target, fake_openai: FakeOpenAIServer
) -> None:
    Target.objects.filter(pk=target.pk).update(
        config={**target.config, "base_url": fake_openai.base_url}
    )

    response = bob_client.post(
        f"{API}/targets/{target.pk}/try", {"input": "What is 2 + 3?"}, content_type=JSON
    )

    assert response.status_code == 200
    body = response.json()
    assert (body["ok"], body["output"], body["error"]) == (True, "5", "")
    assert body["http_status"] == 200


def test_try_reports_a_dead_endpoint(bob_client: Client, target: Target) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    Target.objects.filter(pk=target.pk).update(
        config={**target.config, "base_url": f"http://127.0.0.1:{port}/v1"}
    )

    response = bob_client.post(f"{API}/targets/{target.pk}/try", {}, content_type=JSON)

    assert response.status_code == 200
    body = response.json()
    assert body["ok"] is False and body["output"] == ""
    assert body["error"]


# -- the schema ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "method", "statuses"),
    [
        ("/projects", "get", {"200", "401"}),
        ("/projects", "post", {"201", "400", "401", "409"}),
        ("/projects/{project_id}", "get", {"200", "401", "404"}),
        ("/projects/{project_id}/members", "get", {"200", "401", "404"}),
        (
            "/projects/{project_id}/members",
            "post",
            {"201", "400", "401", "403", "404", "409"},
        ),
        (
            "/projects/{project_id}/members/{user_id}",
            "patch",
            {"200", "400", "401", "403", "404"},
        ),
        (
            "/projects/{project_id}/members/{user_id}",
            "delete",
            {"204", "400", "401", "403", "404"},
        ),
        ("/keys", "get", {"200", "401"}),
        ("/keys", "post", {"201", "400", "401", "403"}),
        ("/keys/{key_id}", "delete", {"204", "401", "404"}),
        (
            "/targets/{target_id}",
            "patch",
            {"200", "400", "401", "403", "404", "409"},
        ),
        ("/targets/{target_id}", "delete", {"204", "401", "403", "404"}),
        ("/targets/{target_id}/try", "post", {"200", "400", "401", "403", "404"}),
    ],
)
def test_schema_documents_each_status(
    alice_client: Client, path: str, method: str, statuses: set[str]
) -> None:
    schema = alice_client.get(f"{API}/openapi.json").json()

    documented = set(schema["paths"][API + path][method]["responses"])

    # Every status the operation can answer is documented; the API-wide ones
    # (422 for a request that does not fit the schema, 413 for a body over the
    # limit, 403 for a session without its CSRF token) come on top.
    assert statuses | {"422"} <= documented


BEYOND = 2**63  # one past the largest id the database can hold


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("get", f"/projects/{BEYOND}"),
        ("get", f"/projects/{BEYOND}/members"),
        ("patch", "/projects/{project}/members/" + str(BEYOND)),
        ("delete", "/projects/{project}/members/" + str(BEYOND)),
        ("delete", f"/keys/{BEYOND}"),
        ("patch", f"/targets/{BEYOND}"),
        ("delete", f"/targets/{BEYOND}"),
        ("post", f"/targets/{BEYOND}/try"),
    ],
)
def test_an_id_beyond_the_database_range_is_refused(
    alice_client: Client, project: Project, method: str, path: str
) -> None:
    url = API + path.replace("{project}", str(project.pk))

    response = getattr(alice_client, method)(
        url, {"role": "viewer", "name": "x"}, content_type=JSON
    )

    # As everywhere in the API: an id the database cannot hold does not fit
    # the schema.
    assert response.status_code == 422


@pytest.mark.parametrize(
    ("text", "what"), [("lab\u0000", "NUL character"), ("lab\ud800", "surrogate")]
)
def test_text_no_database_can_store_is_refused_not_a_server_error(
    client: Client, mallory: User, text: str, what: str
) -> None:
    # Found by the schema run on PostgreSQL, which refuses both: a 500 before.
    body = json.dumps({"name": "x", "description": text})  # escaped, as sent

    response = client.post(
        f"{API}/projects", body, content_type=JSON, **_bearer(mallory)
    )

    assert response.status_code == 422
    assert what in json.dumps(response.json())
    assert not Project.objects.filter(name="x").exists()
