"""A multipart/form-data request without a usable boundary is a 400 with a message,
on the upload page and in the API, never a server error."""

from __future__ import annotations

import pytest
from django.test import Client

from runs.models import Dataset, Project

BODY = (
    b'--x\r\nContent-Disposition: form-data; name="project"\r\n\r\n1\r\n'
    b'--x\r\nContent-Disposition: form-data; name="file"; filename="a.jsonl"\r\n'
    b'\r\n{"input": "a"}\r\n--x--\r\n'
)
CONTENT_TYPES = [
    "multipart/form-data",
    "multipart/form-data; boundary=",
    'multipart/form-data; boundary="a\tb"',
    "multipart/form-data; boundary=" + "x" * 300,
]
API_PATHS = ["/api/v1/datasets/preview", "/api/v1/datasets/upload"]


@pytest.mark.parametrize("content_type", CONTENT_TYPES)
@pytest.mark.parametrize("path", API_PATHS)
def test_api_multipart_without_a_valid_boundary_is_a_400_naming_it(
    bob_client: Client, project: Project, path: str, content_type: str
) -> None:
    response = bob_client.generic("POST", path, BODY, content_type=content_type)

    assert response.status_code == 400
    assert "without a valid boundary" in response.json()["detail"]
    assert not Dataset.all_objects.exists()


@pytest.mark.parametrize("content_type", CONTENT_TYPES)
def test_upload_page_multipart_without_a_valid_boundary_is_a_400_page_naming_it(
    bob_client: Client, project: Project, content_type: str
) -> None:
    response = bob_client.generic(
        "POST", "/datasets/upload/", BODY, content_type=content_type
    )

    assert response.status_code == 400
    assert response["Content-Type"].startswith("text/html")
    assert b"without a valid boundary" in response.content


def test_the_upload_page_gives_the_same_advice_as_the_api_letter_for_letter(
    bob_client: Client, project: Project
) -> None:
    # curl -f (lower case) is another option: --fail.
    page = bob_client.generic(
        "POST", "/datasets/upload/", BODY, content_type="multipart/form-data"
    )
    api = bob_client.generic(
        "POST", API_PATHS[0], BODY, content_type="multipart/form-data"
    )

    advice = api.json()["detail"].split("; ", 1)[1]
    assert advice.endswith("(e.g. curl -F)")
    assert "Content-Type is multipart/form-data" in page.content.decode()
    assert f"{advice}." in page.content.decode()


def test_a_valid_multipart_upload_still_reaches_the_api(
    bob_client: Client, project: Project
) -> None:
    body = BODY.replace(b"\r\n1\r\n", f"\r\n{project.pk}\r\n".encode())

    response = bob_client.generic(
        "POST",
        "/api/v1/datasets/preview",
        body,
        content_type="multipart/form-data; boundary=x",
    )

    assert response.status_code == 200, response.content
    assert response.json()["rows"] == [{"input": "a"}]
