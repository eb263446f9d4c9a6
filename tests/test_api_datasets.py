"""/api/v1/datasets: create from JSON, upload a file, list, read, page items."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.http import HttpResponse
from django.test import Client

from runs.models import Dataset, Project
from runs.projects.services import project_create
from tests.factories import arithmetic_items, make_dataset

pytestmark = pytest.mark.django_db

API = "/api/v1"


def jsonl(rows: list[dict[str, object]]) -> bytes:
    return "\n".join(json.dumps(row) for row in rows).encode()


def create(client: Client, project: Project, **fields: object) -> HttpResponse:
    payload = {"project": project.pk, "name": "qa", "items": arithmetic_items(3)}
    return client.post(
        f"{API}/datasets", {**payload, **fields}, content_type="application/json"
    )


def upload(
    client: Client, project: Project, content: bytes, filename: str, **form: str
) -> HttpResponse:
    file = SimpleUploadedFile(filename, content, content_type="text/plain")
    return client.post(
        f"{API}/datasets/upload", {"project": project.pk, "file": file, **form}
    )


# -- create from JSON ------------------------------------------------------------


@pytest.mark.parametrize("persona", ["alice_client", "bob_client"])
def test_editor_creates_a_dataset_from_items(
    request: pytest.FixtureRequest, project: Project, persona: str
) -> None:
    response = create(request.getfixturevalue(persona), project)

    assert response.status_code == 201
    body = response.json()
    dataset = Dataset.objects.get(pk=body["id"])
    assert body["project"] == project.pk
    assert (body["name"], body["version"], body["item_count"]) == ("qa", 1, 3)
    assert body["content_hash"] == dataset.content_hash
    assert list(dataset.items.values_list("external_id", flat=True)) == [
        "q0",
        "q1",
        "q2",
    ]


def test_same_name_again_is_a_new_version(
    alice_client: Client, project: Project
) -> None:
    create(alice_client, project)

    response = create(alice_client, project)

    assert response.json()["version"] == 2


def test_items_with_custom_field_names(alice_client: Client, project: Project) -> None:
    items = [{"key": "a", "question": "What is 1 + 1?", "answer": "2", "topic": "x"}]

    response = create(
        alice_client,
        project,
        items=items,
        id_field="key",
        input_field="question",
        expected_field="answer",
    )

    assert response.status_code == 201
    item = Dataset.objects.get(pk=response.json()["id"]).items.get()
    assert (item.external_id, item.expected, item.metadata) == (
        "a",
        "2",
        {"topic": "x"},
    )


def test_item_without_input_is_refused_naming_the_record(
    alice_client: Client, project: Project
) -> None:
    items = [{"id": "a", "input": "1 + 1"}, {"id": "b", "question": "2 + 2"}]

    response = create(alice_client, project, items=items)

    assert response.status_code == 400
    body = response.json()
    assert (body["field"], body["record"]) == ("input", 2)
    assert "record 2" in body["detail"]
    assert not Dataset.objects.filter(name="qa").exists()


def test_viewer_cannot_create_a_dataset(
    victor_client: Client, project: Project
) -> None:
    response = create(victor_client, project)

    assert response.status_code == 403
    assert not Dataset.objects.filter(name="qa").exists()


def test_outsider_cannot_create_in_the_project(
    mallory_client: Client, project: Project
) -> None:
    response = create(mallory_client, project)

    assert response.status_code == 404
    assert not Dataset.objects.filter(name="qa").exists()


def test_anonymous_cannot_create_a_dataset(client: Client, project: Project) -> None:
    assert create(client, project).status_code == 401


# -- upload ------------------------------------------------------------------------


def test_upload_jsonl_named_after_the_file(
    bob_client: Client, project: Project
) -> None:
    response = upload(bob_client, project, jsonl(arithmetic_items(4)), "arith.jsonl")

    assert response.status_code == 201
    body = response.json()
    assert (body["name"], body["item_count"]) == ("arith", 4)
    assert (body["source_format"], body["source_name"]) == ("jsonl", "arith.jsonl")


def test_upload_csv_with_explicit_format_and_fields(
    alice_client: Client, project: Project
) -> None:
    content = b"qid,prompt,answer\nx1,What is 2 + 2?,4\nx2,What is 3 + 3?,6\n"

    response = upload(
        alice_client,
        project,
        content,
        "data.txt",
        name="sums",
        format="csv",
        id_field="qid",
        input_field="prompt",
        expected_field="answer",
    )

    assert response.status_code == 201
    dataset = Dataset.objects.get(pk=response.json()["id"])
    assert dataset.name == "sums"
    assert list(dataset.items.values_list("external_id", "expected")) == [
        ("x1", "4"),
        ("x2", "6"),
    ]


def test_bad_upload_names_the_line(alice_client: Client, project: Project) -> None:
    content = jsonl(arithmetic_items(2)) + b'\n{"id": "q2", "input": oops}\n'

    response = upload(alice_client, project, content, "broken.jsonl")

    assert response.status_code == 400
    body = response.json()
    assert body["line"] == 3
    assert body["detail"].startswith("line 3")
    assert not Dataset.objects.filter(name="broken").exists()


def test_upload_with_unknown_format_names_the_field(
    alice_client: Client, project: Project
) -> None:
    response = upload(alice_client, project, b"x", "data.bin")

    assert response.status_code == 400
    assert response.json()["field"] == "format"


def test_upload_without_a_file_is_a_validation_error(
    alice_client: Client, project: Project
) -> None:
    response = alice_client.post(f"{API}/datasets/upload", {"project": project.pk})

    assert response.status_code == 422


def test_viewer_cannot_upload(victor_client: Client, project: Project) -> None:
    response = upload(victor_client, project, jsonl(arithmetic_items(2)), "a.jsonl")

    assert response.status_code == 403


def test_outsider_cannot_upload_into_the_project(
    mallory_client: Client, project: Project
) -> None:
    response = upload(mallory_client, project, jsonl(arithmetic_items(2)), "a.jsonl")

    assert response.status_code == 404
    assert not Dataset.objects.filter(project=project).exists()


# -- list and read ---------------------------------------------------------------


@pytest.mark.parametrize("persona", ["alice_client", "bob_client", "victor_client"])
def test_members_list_the_projects_datasets(
    request: pytest.FixtureRequest, dataset: Dataset, persona: str
) -> None:
    response = request.getfixturevalue(persona).get(f"{API}/datasets")

    assert response.status_code == 200
    assert response.json()["count"] == 1
    assert response.json()["items"][0]["id"] == dataset.pk


def test_outsider_never_sees_the_projects_datasets(
    mallory_client: Client, dataset: Dataset, other_project: Project
) -> None:
    own = make_dataset(other_project, arithmetic_items(2), name="mine")

    response = mallory_client.get(f"{API}/datasets")
    filtered = mallory_client.get(f"{API}/datasets?project={dataset.project_id}")

    assert [d["id"] for d in response.json()["items"]] == [own.pk]
    assert filtered.json() == {"items": [], "count": 0}


def test_list_filters_by_project(
    alice_client: Client, alice: User, dataset: Dataset
) -> None:
    elsewhere = project_create(name="Side", owner=alice)
    make_dataset(elsewhere, arithmetic_items(2), name="side")

    everything = alice_client.get(f"{API}/datasets").json()
    only_research = alice_client.get(
        f"{API}/datasets?project={dataset.project_id}"
    ).json()

    assert everything["count"] == 2
    assert [d["id"] for d in only_research["items"]] == [dataset.pk]


def test_list_is_paginated(alice_client: Client, project: Project) -> None:
    for n in range(3):
        make_dataset(project, arithmetic_items(1), name=f"d{n}")

    page = alice_client.get(f"{API}/datasets?page=2&page_size=2").json()

    assert page["count"] == 3
    assert len(page["items"]) == 1


def test_members_read_a_dataset(victor_client: Client, dataset: Dataset) -> None:
    response = victor_client.get(f"{API}/datasets/{dataset.pk}")

    assert response.status_code == 200
    assert response.json()["item_count"] == 10


def test_outsider_gets_404_for_a_dataset(
    mallory_client: Client, dataset: Dataset
) -> None:
    response = mallory_client.get(f"{API}/datasets/{dataset.pk}")

    assert response.status_code == 404


# -- items -------------------------------------------------------------------------


def test_items_come_in_dataset_order_page_by_page(
    victor_client: Client, dataset: Dataset
) -> None:
    url = f"{API}/datasets/{dataset.pk}/items?page_size=4"

    pages = [victor_client.get(f"{url}&page={n}").json() for n in (1, 2, 3)]

    assert [page["count"] for page in pages] == [10, 10, 10]
    indexes = [item["index"] for page in pages for item in page["items"]]
    assert indexes == list(range(10))
    first = pages[0]["items"][0]
    assert first == {
        "index": 0,
        "external_id": "q0",
        "input": "What is 0 + 0?",
        "expected": "0",
        "metadata": {},
    }


def test_items_default_to_pages_of_50(alice_client: Client, project: Project) -> None:
    dataset = make_dataset(project, arithmetic_items(60), name="big")

    page = alice_client.get(f"{API}/datasets/{dataset.pk}/items").json()

    assert (page["count"], len(page["items"])) == (60, 50)


def test_outsider_gets_404_for_items(mallory_client: Client, dataset: Dataset) -> None:
    response = mallory_client.get(f"{API}/datasets/{dataset.pk}/items")

    assert response.status_code == 404


# -- expected answers and the preview ---------------------------------------------

ANSWER_CSV = (
    b"qid,question,answer,topic\nx1,What is 2 + 2?,4,sum\nx2,What is 3 + 3?,,sum\n"
)


def test_upload_says_how_many_items_have_an_expected_answer(
    alice_client: Client, project: Project
) -> None:
    response = upload(
        alice_client,
        project,
        ANSWER_CSV,
        "sums.csv",
        id_field="qid",
        input_field="question",
        expected_field="answer",
    )

    assert response.status_code == 201
    body = response.json()
    assert (body["item_count"], body["expected_count"]) == (2, 1)
    assert body["expected_field"] == "answer"
    assert body["fields"] == {"qid": 2, "question": 2, "answer": 1, "topic": 2}
    assert alice_client.get(f"{API}/datasets/{body['id']}").json() == body


def test_upload_whose_expected_field_no_item_has_is_refused(
    alice_client: Client, project: Project
) -> None:
    """An answer column not called "expected" used to import silently."""
    content = jsonl([{"id": "a", "input": "2+2", "answer": "4"}])

    response = upload(alice_client, project, content, "qa.jsonl")

    assert response.status_code == 400
    body = response.json()
    assert body["field"] == "expected_field"
    assert "'id', 'input', 'answer'" in body["detail"]
    assert "perhaps 'answer'?" in body["detail"]
    assert not Dataset.all_objects.exists()


def test_upload_may_say_there_is_no_expected_answer(
    alice_client: Client, project: Project
) -> None:
    content = jsonl([{"id": "a", "input": "Write a poem."}])

    response = upload(alice_client, project, content, "poems.jsonl", expected_field="")

    assert response.status_code == 201
    assert (response.json()["expected_count"], response.json()["expected_field"]) == (
        0,
        "",
    )


def test_items_may_say_there_is_no_expected_answer(
    alice_client: Client, project: Project
) -> None:
    items = [{"id": "a", "input": "Write a poem."}]

    refused = create(alice_client, project, items=items)
    accepted = create(alice_client, project, items=items, expected_field=None)

    assert (refused.status_code, refused.json()["field"]) == (400, "expected_field")
    assert accepted.status_code == 201
    assert accepted.json()["expected_count"] == 0


def preview(
    client: Client, project: Project, content: bytes, filename: str, **form: str
) -> HttpResponse:
    file = SimpleUploadedFile(filename, content, content_type="text/plain")
    data = {"file": file, "project": project.pk, **form}
    return client.post(f"{API}/datasets/preview", data)


def test_preview_lists_fields_with_counts_first_rows_and_a_guess(
    bob_client: Client, project: Project
) -> None:
    response = preview(bob_client, project, ANSWER_CSV, "sums.csv")

    assert response.status_code == 200
    assert response.json() == {
        "format": "csv",
        "count": 2,
        "fields": {"qid": 2, "question": 2, "answer": 1, "topic": 2},
        "rows": [
            {"qid": "x1", "question": "What is 2 + 2?", "answer": "4", "topic": "sum"},
            {"qid": "x2", "question": "What is 3 + 3?", "topic": "sum"},
        ],
        "guess": {
            "id_field": "qid",
            "input_field": "question",
            "expected_field": "answer",
        },
    }
    assert not Dataset.all_objects.exists()


def test_preview_shows_at_most_ten_rows(alice_client: Client, project: Project) -> None:
    response = preview(alice_client, project, jsonl(arithmetic_items(25)), "a.jsonl")

    body = response.json()
    assert (body["count"], len(body["rows"])) == (25, 10)
    assert body["guess"]["expected_field"] == "expected"


def test_preview_of_a_bad_file_names_the_line(
    alice_client: Client, project: Project
) -> None:
    response = preview(alice_client, project, b'id,input\n1,"open\n2,b\n', "x.csv")

    assert response.status_code == 400
    assert response.json()["line"] == 2


def test_preview_needs_authentication(client: Client, project: Project) -> None:
    response = preview(client, project, ANSWER_CSV, "sums.csv")

    assert response.status_code == 401


def test_preview_needs_a_project(alice_client: Client, project: Project) -> None:
    file = SimpleUploadedFile("sums.csv", ANSWER_CSV, content_type="text/plain")
    response = alice_client.post(f"{API}/datasets/preview", {"file": file})

    assert response.status_code == 422
    assert "project" in json.dumps(response.json())


def test_preview_is_forbidden_to_a_viewer(
    victor_client: Client, project: Project
) -> None:
    response = preview(victor_client, project, ANSWER_CSV, "sums.csv")

    assert response.status_code == 403
    assert "editor" in response.json()["detail"]


def test_preview_in_an_outsiders_project_is_not_found(
    mallory_client: Client, project: Project
) -> None:
    response = preview(mallory_client, project, ANSWER_CSV, "sums.csv")

    assert response.status_code == 404


@pytest.mark.parametrize(
    ("content", "filename"),
    [
        (b"- input: " + b"[" * 10_000 + b"]" * 10_000 + b"\n", "x.yaml"),
        (
            b'- input: x\n  l:\n    a0: &a0 ["lol"]\n'
            + b"".join(
                b"    a%d: &a%d [" % (n, n)
                + b", ".join([b"*a%d" % (n - 1)] * 9)
                + b"]\n"
                for n in range(1, 10)
            ),
            "x.yaml",
        ),
        (b'{"input": ' + b"1" * 5000 + b"}\n", "x.jsonl"),
        (b'{"input": "\\ud800"}\n', "x.jsonl"),
        (b'{"input": "a\\u0000"}\n', "x.jsonl"),
        (b'[{"input": ' + b"[" * 100_000 + b"]" * 100_000 + b"}]", "x.json"),
        (b"input\n\xff\n", "x.csv"),
        (b'id,input\n1,"never closed\n2,b\n', "x.csv"),
    ],
    ids=[
        "deep-yaml",
        "yaml-laughs",
        "long-number",
        "surrogate",
        "nul",
        "deep-json",
        "not-utf8",
        "open-quote",
    ],
)
def test_hostile_uploads_are_400s_naming_the_line(
    alice_client: Client, project: Project, content: bytes, filename: str
) -> None:
    response = upload(alice_client, project, content, filename, expected_field="")

    assert response.status_code == 400
    body = response.json()
    assert isinstance(body["line"], int)
    assert body["detail"].startswith(f"line {body['line']}") or body["record"]
    assert not Dataset.all_objects.exists()
