"""Out-of-range numbers are refused, not sent to the database; API errors are JSON."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from runs.models import Dataset
from runs.projects.services import api_key_create

pytestmark = pytest.mark.django_db

API = "/api/v1"
TOO_BIG = "9223372036854775808"  # 2**63


@pytest.fixture
def api(alice: User, dataset: Dataset) -> Client:
    _, plain = api_key_create(user=alice, name="ci")
    return Client(HTTP_AUTHORIZATION=f"Bearer {plain}")


@pytest.mark.parametrize("path", ["/datasets", "/targets", "/runs"])
@pytest.mark.parametrize(
    "query",
    [f"project={TOO_BIG}", "project=0", f"page={TOO_BIG}", "page=1e20", "page=0"],
)
def test_list_refuses_an_out_of_range_number_with_422(
    api: Client, path: str, query: str
) -> None:
    response = api.get(f"{API}{path}?{query}")

    assert response.status_code == 422
    assert isinstance(response.json()["detail"], list)


@pytest.mark.parametrize(
    "path",
    [
        f"/datasets/{TOO_BIG}",
        f"/datasets/{TOO_BIG}/items",
        f"/targets/{TOO_BIG}",
        f"/runs/{TOO_BIG}",
        f"/runs/{TOO_BIG}/results",
        f"/runs?dataset={TOO_BIG}",
        f"/runs/1/results?page={TOO_BIG}",
    ],
)
def test_read_refuses_an_id_beyond_the_database_with_422(
    api: Client, path: str
) -> None:
    assert api.get(API + path).status_code == 422


def test_write_refuses_an_id_beyond_the_database_with_422(api: Client) -> None:
    response = api.post(
        f"{API}/runs",
        {"dataset": int(TOO_BIG), "target_kind": "python", "scorers": ["exact_match"]},
        content_type="application/json",
    )

    assert response.status_code == 422


@pytest.mark.parametrize(
    "query", [f"project={TOO_BIG}", f"page={TOO_BIG}", "page=1e400", "page=²"]
)
def test_runs_page_ignores_out_of_range_numbers(
    alice_client: Client, dataset: Dataset, query: str
) -> None:
    assert alice_client.get(f"/?{query}").status_code == 200


@pytest.mark.parametrize(
    "path",
    [f"/runs/{TOO_BIG}/", f"/datasets/{TOO_BIG}/", f"/runs/1/results/{TOO_BIG}/"],
)
def test_page_with_an_id_beyond_the_database_is_404(
    alice_client: Client, path: str
) -> None:
    assert alice_client.get(path).status_code == 404


def test_unknown_api_url_is_404_json(api: Client) -> None:
    response = api.get(f"{API}/no-such-thing")

    assert response.status_code == 404
    assert response.json() == {"detail": "Not Found"}


def test_method_not_allowed_is_405_json(api: Client) -> None:
    response = api.delete(f"{API}/runs")

    assert response.status_code == 405
    assert response.json() == {"detail": "Method Not Allowed"}
    assert "GET" in response["Allow"]


def test_csrf_failure_of_a_session_is_403_json(alice: User) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)

    response = client.post(f"{API}/targets", {}, content_type="application/json")

    assert response.status_code == 403
    assert "detail" in response.json()


def test_server_error_is_logged_and_answered_as_json(
    api: Client, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(**kwargs: object) -> None:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr("runs.results.api.run_list", broken)

    response = api.get(f"{API}/runs")

    assert response.status_code == 500
    assert response.json() == {"detail": "Internal server error"}
    assert "disk on fire" in caplog.text


def test_schema_documents_every_status_an_operation_returns(
    alice_client: Client,
) -> None:
    schema = alice_client.get(f"{API}/openapi.json").json()

    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            statuses = set(operation["responses"])
            assert {"401", "422"} <= statuses, (method, path)
            if "{" in path:
                assert "404" in statuses, (method, path)
            if method == "post":
                assert {"400", "403", "413"} <= statuses, (method, path)
