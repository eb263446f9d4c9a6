"""Who may call the API: session (with CSRF) or bearer key, and nobody else."""

from __future__ import annotations

from io import StringIO

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from runs.models import ApiKey, Dataset, Project, Target
from runs.projects.key_usage import key_usage_flush
from runs.projects.services import api_key_create

pytestmark = pytest.mark.django_db

API = "/api/v1"


def bearer(plain: str) -> dict[str, str]:
    return {"HTTP_AUTHORIZATION": f"Bearer {plain}"}


def target_payload(project: Project) -> dict[str, object]:
    return {
        "project": project.pk,
        "name": "gpt",
        "kind": "openai_chat",
        "config": {"base_url": "http://127.0.0.1:9/v1", "model": "m"},
    }


@pytest.mark.parametrize(
    "path",
    [
        "/datasets",
        "/datasets/1",
        "/datasets/1/items",
        "/targets",
        "/targets/1",
        "/runs",
        "/runs/1",
        "/runs/1/results",
        "/runs/1/summary",
        "/runs/1/export",
        "/runs/1/clusters",
        "/compare?baseline=1&candidates=2",
        "/compare/items?baseline=1&candidate=2&scorer=exact_match",
    ],
)
def test_anonymous_read_gets_401_json_not_a_login_redirect(
    client: Client, dataset: Dataset, path: str
) -> None:
    response = client.get(API + path)

    assert response.status_code == 401
    assert response.json() == {"detail": "Unauthorized"}


@pytest.mark.parametrize(
    "path",
    [
        "/datasets",
        "/datasets/upload",
        "/targets",
        "/runs",
        "/runs/1/cancel",
        "/runs/1/retry",
        "/runs/1/rescore",
        "/runs/1/resume",
    ],
)
def test_anonymous_write_gets_401(client: Client, project: Project, path: str) -> None:
    response = client.post(API + path, {}, content_type="application/json")

    assert response.status_code == 401


def test_bearer_key_reads_without_a_session(
    client: Client, alice: User, dataset: Dataset
) -> None:
    _, plain = api_key_create(user=alice, name="ci")

    response = client.get(f"{API}/datasets", **bearer(plain))

    assert response.status_code == 200
    assert [d["id"] for d in response.json()["items"]] == [dataset.pk]


def test_bearer_key_writes_without_a_csrf_token(alice: User, project: Project) -> None:
    _, plain = api_key_create(user=alice, name="ci")
    client = Client(enforce_csrf_checks=True)

    response = client.post(
        f"{API}/targets",
        target_payload(project),
        content_type="application/json",
        **bearer(plain),
    )

    assert response.status_code == 201
    assert Target.objects.get(name="gpt").created_by == alice


@pytest.mark.django_db(transaction=True)
def test_key_records_when_it_was_last_used(client: Client, alice: User) -> None:
    key, plain = api_key_create(user=alice, name="ci")

    client.get(f"{API}/runs", **bearer(plain))

    key_usage_flush()
    key.refresh_from_db()
    assert key.last_used_at is not None


def test_revoked_key_gets_401(client: Client, alice: User, project: Project) -> None:
    key, plain = api_key_create(user=alice, name="ci")
    ApiKey.objects.filter(pk=key.pk).update(revoked_at=timezone.now())

    response = client.get(f"{API}/datasets", **bearer(plain))

    assert response.status_code == 401


def test_key_of_a_deactivated_user_gets_401(client: Client, alice: User) -> None:
    _, plain = api_key_create(user=alice, name="ci")
    User.objects.filter(pk=alice.pk).update(is_active=False)

    response = client.get(f"{API}/datasets", **bearer(plain))

    assert response.status_code == 401


@pytest.mark.parametrize(
    "header",
    [
        "Bearer evk_00000000_not-a-real-secret",
        "Bearer not-even-our-format",
        "Bearer ",
        "Basic YWxpY2U6cGFzc3dvcmQ=",
    ],
)
def test_unknown_or_malformed_key_gets_401(
    client: Client, alice: User, header: str
) -> None:
    response = client.get(f"{API}/datasets", HTTP_AUTHORIZATION=header)

    assert response.status_code == 401


def test_key_with_a_wrong_secret_gets_401(client: Client, alice: User) -> None:
    key, plain = api_key_create(user=alice, name="ci")
    tampered = f"evk_{key.prefix}_{'x' * 43}"
    assert tampered != plain

    response = client.get(f"{API}/datasets", **bearer(tampered))

    assert response.status_code == 401


def test_outsiders_key_sees_none_of_the_project(
    client: Client, mallory: User, other_project: Project, dataset: Dataset
) -> None:
    _, plain = api_key_create(user=mallory, name="mine")

    listing = client.get(f"{API}/datasets", **bearer(plain))
    detail = client.get(f"{API}/datasets/{dataset.pk}", **bearer(plain))

    assert listing.json() == {"items": [], "count": 0}
    assert detail.status_code == 404


def test_session_write_without_csrf_token_is_refused(
    alice: User, project: Project
) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)

    response = client.post(
        f"{API}/targets", target_payload(project), content_type="application/json"
    )

    assert response.status_code == 403
    assert not Target.objects.exists()


def test_session_write_with_csrf_token_succeeds(alice: User, project: Project) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    secret = "a" * 32  # an unmasked CSRF secret is a valid token too
    client.cookies[settings.CSRF_COOKIE_NAME] = secret

    response = client.post(
        f"{API}/targets",
        target_payload(project),
        content_type="application/json",
        HTTP_X_CSRFTOKEN=secret,
    )

    assert response.status_code == 201


def test_domain_errors_answer_detail_field_and_line(
    alice_client: Client, project: Project
) -> None:
    response = alice_client.get(f"{API}/runs/999999")

    assert response.status_code == 404
    assert response.json() == {"detail": "no run 999999", "field": None, "line": None}


def test_schema_validation_errors_stay_422(
    alice_client: Client, project: Project
) -> None:
    response = alice_client.post(
        f"{API}/targets",
        {"project": project.pk, "kind": "python"},
        content_type="application/json",
    )

    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["body", "payload", "name"]


def test_docs_page_loads_for_a_logged_in_user(alice_client: Client) -> None:
    response = alice_client.get(f"{API}/docs")

    assert response.status_code == 200
    assert b"openapi.json" in response.content


def test_openapi_schema_lists_every_endpoint(alice_client: Client) -> None:
    response = alice_client.get(f"{API}/openapi.json")

    assert response.status_code == 200
    paths = response.json()["paths"]
    assert set(paths) == {
        f"{API}/datasets",
        f"{API}/datasets/upload",
        f"{API}/datasets/preview",
        f"{API}/datasets/{{dataset_id}}",
        f"{API}/datasets/{{dataset_id}}/items",
        f"{API}/targets",
        f"{API}/targets/{{target_id}}",
        f"{API}/targets/kinds",
        f"{API}/scorers",
        f"{API}/runs",
        f"{API}/runs/{{run_id}}",
        f"{API}/runs/{{run_id}}/cancel",
        f"{API}/runs/{{run_id}}/results",
        f"{API}/targets/{{target_id}}/try",
        f"{API}/projects",
        f"{API}/projects/{{project_id}}",
        f"{API}/projects/{{project_id}}/members",
        f"{API}/projects/{{project_id}}/members/{{user_id}}",
        f"{API}/keys",
        f"{API}/keys/{{key_id}}",
        f"{API}/projects/{{project_id}}/secrets",
        f"{API}/projects/{{project_id}}/secrets/{{name}}",
        f"{API}/runs/{{run_id}}/summary",
        f"{API}/runs/{{run_id}}/retry",
        f"{API}/runs/{{run_id}}/export",
        f"{API}/runs/{{run_id}}/clusters",
        f"{API}/compare",
        f"{API}/compare/items",
        f"{API}/leaderboard",
        f"{API}/plan",
        f"{API}/runs/{{run_id}}/rescore",
        f"{API}/runs/{{run_id}}/scoring-passes",
        f"{API}/runs/{{run_id}}/resume",
        f"{API}/otlp/v1/traces",
        f"{API}/alert-channels",
        f"{API}/alert-channels/{{channel_id}}",
        f"{API}/alert-channels/{{channel_id}}/deliveries",
        f"{API}/alert-channels/{{channel_id}}/secret",
        f"{API}/alert-channels/{{channel_id}}/test",
        f"{API}/evaluations",
        f"{API}/evaluations/{{evaluation_id}}",
        f"{API}/evaluations/{{evaluation_id}}/history",
        f"{API}/evaluations/{{evaluation_id}}/runs",
        f"{API}/evaluations/{{evaluation_id}}/schedules",
        f"{API}/evaluations/{{evaluation_id}}/schedules/{{schedule_id}}",
        f"{API}/results/{{result_id}}/trajectory",
        f"{API}/runs/estimate",
        f"{API}/runs/{{run_id}}/judge-agreement",
        f"{API}/tools",
        f"{API}/projects/{{project_id}}/embeddings",
        f"{API}/projects/{{project_id}}/judge-calibration",
        f"{API}/review-queues",
        f"{API}/review-queues/{{queue_id}}",
        f"{API}/review-queues/{{queue_id}}/labels",
        f"{API}/review-queues/{{queue_id}}/agreement",
        f"{API}/review-queues/{{queue_id}}/dataset",
        f"{API}/review-queues/{{queue_id}}/items/{{item_id}}/adjudication",
        f"{API}/review-queues/{{queue_id}}/labels/{{label_id}}",
        f"{API}/review-queues/{{queue_id}}/matrix",
        f"{API}/review-queues/{{queue_id}}/next",
        f"{API}/runs/{{run_id}}/failing-steps",
        f"{API}/trajectories/compare",
        f"{API}/trajectories/diff",
    }
    assert set(paths[f"{API}/runs"]) == {"get", "post"}


def test_docs_send_anonymous_visitors_to_the_login_page(client: Client) -> None:
    response = client.get(f"{API}/docs")

    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


# -- create_api_key ----------------------------------------------------------------


def test_create_api_key_prints_only_a_working_key_on_stdout(
    client: Client, alice: User, dataset: Dataset
) -> None:
    out, err = StringIO(), StringIO()

    call_command("create_api_key", "alice", "--name", "laptop", stdout=out, stderr=err)

    lines = out.getvalue().splitlines()
    assert len(lines) == 1
    assert ApiKey.objects.get(user=alice).name == "laptop"
    assert "only this once" in err.getvalue()
    response = client.get(f"{API}/datasets", **bearer(lines[0]))
    assert response.status_code == 200


def test_create_api_key_for_unknown_user_fails(db: None) -> None:
    with pytest.raises(CommandError, match="no user named 'nobody'"):
        call_command("create_api_key", "nobody", stdout=StringIO())

    assert not ApiKey.objects.exists()
