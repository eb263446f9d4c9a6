"""The dataset pages: list, detail with items and versions, and upload."""

from __future__ import annotations

import json

from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from runs.models import Dataset, Item, Project
from tests.factories import arithmetic_items, make_dataset


def _jsonl(rows: list[dict]) -> bytes:
    return "\n".join(json.dumps(row) for row in rows).encode() + b"\n"


def _upload(project: Project, content: bytes, **changes: object) -> dict:
    data: dict[str, object] = {
        "file": SimpleUploadedFile("questions.jsonl", content),
        "project": project.pk,
        "name": "questions",
        "format": "",
        "id_field": "id",
        "input_field": "input",
        "expected_field": "expected",
    }
    data.update(changes)
    return data


def test_dataset_list_shows_the_members_datasets(
    victor_client: Client, dataset: Dataset
) -> None:
    response = victor_client.get(reverse("runs:dataset_list"))

    assert response.status_code == 200
    assert (
        reverse("runs:dataset_detail", args=[dataset.pk]) in response.content.decode()
    )


def test_dataset_list_hides_other_projects(
    mallory_client: Client, dataset: Dataset
) -> None:
    response = mallory_client.get(reverse("runs:dataset_list"))

    assert response.status_code == 200
    page = response.content.decode()
    assert reverse("runs:dataset_detail", args=[dataset.pk]) not in page


def test_dataset_page_shows_items_and_other_versions(
    victor_client: Client, dataset: Dataset, project: Project
) -> None:
    newer = make_dataset(project, arithmetic_items(2, marker=" (v2)"), version=2)

    response = victor_client.get(reverse("runs:dataset_detail", args=[dataset.pk]))

    assert response.status_code == 200
    page = response.content.decode()
    assert "What is 9 + 18?" in page
    assert "<code>q9</code>" in page
    assert reverse("runs:dataset_detail", args=[newer.pk]) in page
    assert reverse("runs:dataset_upload") in page


def test_dataset_page_paginates_items(victor_client: Client, project: Project) -> None:
    big = make_dataset(project, arithmetic_items(120), name="big")

    first = victor_client.get(reverse("runs:dataset_detail", args=[big.pk]))
    third = victor_client.get(
        reverse("runs:dataset_detail", args=[big.pk]), {"page": 3}
    )

    assert len(first.context["page"].object_list) == 50
    assert third.context["page"].object_list[0].index == 100


def test_dataset_page_truncates_long_inputs(
    victor_client: Client, project: Project
) -> None:
    long = make_dataset(
        project, [{"id": "a", "input": "x" * 1000, "expected": "y"}], name="long"
    )

    page = victor_client.get(reverse("runs:dataset_detail", args=[long.pk]))

    assert "x" * 139 + "…" in page.content.decode()
    assert "x" * 1000 not in page.content.decode()


def test_dataset_page_is_not_found_for_an_outsider(
    mallory_client: Client, dataset: Dataset
) -> None:
    response = mallory_client.get(reverse("runs:dataset_detail", args=[dataset.pk]))

    assert response.status_code == 404


def test_upload_page_renders_with_field_mapping(
    bob_client: Client, project: Project
) -> None:
    response = bob_client.get(reverse("runs:dataset_upload"))

    assert response.status_code == 200
    page = response.content.decode()
    assert 'enctype="multipart/form-data"' in page
    for name in ("id_field", "input_field", "expected_field", "format"):
        assert f'name="{name}"' in page


def test_upload_stores_a_dataset_and_opens_it(
    bob_client: Client, project: Project
) -> None:
    content = _jsonl(
        [
            {"qid": "a", "question": "1+1", "answer": "2"},
            {"qid": "b", "question": "2+2"},
        ]
    )

    response = bob_client.post(
        reverse("runs:dataset_upload"),
        _upload(
            project,
            content,
            id_field="qid",
            input_field="question",
            expected_field="answer",
        ),
    )

    dataset = Dataset.objects.get(name="questions")
    assert response.status_code == 302
    assert response.url == reverse("runs:dataset_detail", args=[dataset.pk])
    assert dataset.item_count == 2
    assert list(dataset.items.values_list("external_id", "input", "expected")) == [
        ("a", "1+1", "2"),
        ("b", "2+2", None),
    ]


def test_upload_of_a_bad_line_names_it_and_stores_nothing(
    bob_client: Client, project: Project
) -> None:
    content = b'{"id": "a", "input": "ok"}\n{"id": "b", "input": \n'

    response = bob_client.post(
        reverse("runs:dataset_upload"), _upload(project, content)
    )

    assert response.status_code == 200
    errors = response.context["form"].errors["file"]
    assert "line 2" in errors[0]
    assert "line 2" in response.content.decode()
    assert not Dataset.objects.filter(name="questions").exists()
    assert not Item.objects.filter(external_id="a").exists()


def test_upload_of_a_missing_input_names_the_field(
    bob_client: Client, project: Project
) -> None:
    content = _jsonl([{"id": "a", "input": "ok"}, {"id": "b", "question": "?"}])

    response = bob_client.post(
        reverse("runs:dataset_upload"), _upload(project, content)
    )

    assert response.status_code == 200
    message = response.context["form"].errors["file"][0]
    assert "line 2" in message and "input" in message
    assert not Dataset.objects.filter(name="questions").exists()


def test_upload_is_forbidden_to_a_viewer(
    victor_client: Client, project: Project
) -> None:
    response = victor_client.post(
        reverse("runs:dataset_upload"),
        _upload(project, _jsonl([{"id": "a", "input": "x"}])),
    )

    assert response.status_code == 403
    assert not Dataset.objects.filter(name="questions").exists()


def test_upload_into_an_outsiders_project_is_not_found(
    mallory_client: Client, project: Project
) -> None:
    response = mallory_client.post(
        reverse("runs:dataset_upload"),
        _upload(project, _jsonl([{"id": "a", "input": "x"}])),
    )

    assert response.status_code == 404
    assert not Dataset.objects.filter(name="questions").exists()
