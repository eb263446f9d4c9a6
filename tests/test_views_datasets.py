"""The dataset pages: list, detail with items and versions, and upload."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.http import HttpResponse
from django.test import Client
from django.urls import reverse

from runs.datasets.importers import staging
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
    }
    data.update(changes)
    return data


@pytest.fixture(autouse=True)
def _data_dir(settings, tmp_path: Path) -> None:
    settings.DATA_DIR = tmp_path


def _staged_files(tmp_path: Path) -> list[Path]:
    return sorted(p for p in (tmp_path / "uploads").rglob("*") if p.is_file())


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


def test_dataset_page_offers_an_editor_a_new_version_and_a_run(
    bob_client: Client, dataset: Dataset
) -> None:
    page = bob_client.get(reverse("runs:dataset_detail", args=[dataset.pk]))

    assert reverse("runs:dataset_upload") in page.content.decode()
    assert f"{reverse('runs:run_new')}?dataset={dataset.pk}" in page.content.decode()


def test_dataset_page_offers_a_viewer_no_action_the_viewer_would_be_refused(
    victor_client: Client, dataset: Dataset
) -> None:
    # As on a target's page: uploading and running need the editor role.
    page = victor_client.get(reverse("runs:dataset_detail", args=[dataset.pk]))

    assert reverse("runs:dataset_upload") not in page.content.decode()
    assert reverse("runs:run_new") not in page.content.decode()


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


def test_upload_page_asks_for_the_file_first(
    bob_client: Client, project: Project
) -> None:
    response = bob_client.get(reverse("runs:dataset_upload"))

    assert response.status_code == 200
    page = response.content.decode()
    assert 'enctype="multipart/form-data"' in page
    for name in ("file", "project", "name", "format"):
        assert f'name="{name}"' in page


ANSWER_NOT_EXPECTED = [
    {"qid": "a", "question": "1+1", "answer": "2", "topic": "sum"},
    {"qid": "b", "question": "2+2"},
]


def _stage(client: Client, project: Project, content: bytes) -> HttpResponse:
    response = client.post(reverse("runs:dataset_upload"), _upload(project, content))
    assert response.status_code == 302, response.content.decode()[-2000:]
    return client.get(response.url)


def test_upload_shows_the_fields_found_and_guesses_the_mapping(
    bob_client: Client, project: Project, tmp_path: Path
) -> None:
    """A file whose answer column is not called "expected" is mapped, not lost."""
    response = _stage(bob_client, project, _jsonl(ANSWER_NOT_EXPECTED))

    assert response.status_code == 200
    assert not Dataset.objects.exists()  # nothing stored before the mapping
    assert len(_staged_files(tmp_path)) == 2  # the file and what it holds
    form = response.context["form"]
    assert form.initial == {
        "id_field": "qid",
        "input_field": "question",
        "expected_field": "answer",
    }
    preview = response.context["staged"].preview
    assert preview.fields == {"qid": 2, "question": 2, "answer": 1, "topic": 1}
    page = response.content.decode()
    assert "answer (1 of 2)" in page
    assert "none: the items have no expected answer" in page
    assert '<td class="cell-text">1+1</td>' in page


def test_a_staged_upload_is_readable_by_its_owner_only(
    bob_client: Client, project: Project, tmp_path: Path
) -> None:
    old = os.umask(0)  # one that would leave everything open
    try:
        _stage(bob_client, project, _jsonl(ANSWER_NOT_EXPECTED))
    finally:
        os.umask(old)

    staged = list((tmp_path / "uploads").rglob("*"))
    modes = {
        path: stat.S_IMODE(path.stat().st_mode)
        for path in [tmp_path / "uploads", *staged]
    }
    assert len(staged) == 4  # the user's folder, the upload's, two files
    assert modes == {path: 0o600 if path.is_file() else 0o700 for path in modes}


def test_confirming_the_mapping_imports_and_forgets_the_file(
    bob_client: Client, project: Project, tmp_path: Path
) -> None:
    preview_page = _stage(bob_client, project, _jsonl(ANSWER_NOT_EXPECTED))

    response = bob_client.post(
        preview_page.request["PATH_INFO"],
        {"id_field": "qid", "input_field": "question", "expected_field": "answer"},
    )

    dataset = Dataset.objects.get(name="questions")
    assert response.status_code == 302
    assert response.url == reverse("runs:dataset_detail", args=[dataset.pk])
    assert (dataset.item_count, dataset.expected_count) == (2, 1)
    assert dataset.expected_field == "answer"
    assert list(
        dataset.items.values_list("external_id", "input", "expected", "metadata")
    ) == [("a", "1+1", "2", {"topic": "sum"}), ("b", "2+2", None, {})]
    assert _staged_files(tmp_path) == []
    detail = bob_client.get(response.url).content.decode()
    assert "1 of 2" in detail


def test_no_expected_answer_and_numbered_ids_may_be_chosen(
    bob_client: Client, project: Project
) -> None:
    preview_page = _stage(bob_client, project, _jsonl(ANSWER_NOT_EXPECTED))

    bob_client.post(
        preview_page.request["PATH_INFO"],
        {"id_field": "", "input_field": "question", "expected_field": ""},
    )

    dataset = Dataset.objects.get(name="questions")
    assert dataset.expected_count == 0
    assert list(dataset.items.values_list("external_id", "expected")) == [
        ("1", None),
        ("2", None),
    ]


def test_the_mapping_offers_only_fields_that_items_have(
    bob_client: Client, project: Project
) -> None:
    content = _jsonl([{"input": "a", "note": None}, {"input": "b"}])
    preview_page = _stage(bob_client, project, content)

    response = bob_client.post(
        preview_page.request["PATH_INFO"],
        {"id_field": "", "input_field": "input", "expected_field": "note"},
    )

    assert response.status_code == 200
    assert "note" in response.context["form"].errors["expected_field"][0]
    assert response.context["form"].initial["expected_field"] == ""
    assert not Dataset.objects.exists()


def test_another_user_cannot_use_the_upload(
    bob_client: Client, alice_client: Client, project: Project
) -> None:
    preview_page = _stage(bob_client, project, _jsonl(ANSWER_NOT_EXPECTED))
    url = preview_page.request["PATH_INFO"]

    assert alice_client.get(url).status_code == 404
    response = alice_client.post(
        url, {"id_field": "qid", "input_field": "question", "expected_field": ""}
    )
    assert response.status_code == 404
    assert not Dataset.objects.exists()


def test_an_expired_upload_is_gone(
    bob_client: Client, project: Project, settings, tmp_path: Path
) -> None:
    preview_page = _stage(bob_client, project, _jsonl(ANSWER_NOT_EXPECTED))
    for path in (tmp_path / "uploads").rglob("*"):
        os.utime(path, (0, 0))

    response = bob_client.get(preview_page.request["PATH_INFO"])

    assert response.status_code == 404


def test_a_user_keeps_only_the_newest_few_uploads(
    bob_client: Client, project: Project, tmp_path: Path
) -> None:
    for _ in range(staging.MAX_PER_USER + 2):
        _stage(bob_client, project, _jsonl(ANSWER_NOT_EXPECTED))

    assert len(list((tmp_path / "uploads").glob("*/*"))) == staging.MAX_PER_USER


def test_upload_of_a_bad_line_names_it_and_keeps_nothing(
    bob_client: Client, project: Project, tmp_path: Path
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
    assert _staged_files(tmp_path) == []


def test_upload_of_an_unclosed_csv_quote_names_its_line(
    bob_client: Client, project: Project
) -> None:
    content = b'id,input\n1,"first\n2,second\n3,third\n'

    response = bob_client.post(
        reverse("runs:dataset_upload"),
        _upload(project, content, file=SimpleUploadedFile("q.csv", content)),
    )

    assert response.status_code == 200
    message = response.context["form"].errors["file"][0]
    assert message == "line 2: a quoted cell that starts in this row is never closed"


def test_upload_is_forbidden_to_a_viewer(
    victor_client: Client, project: Project, tmp_path: Path
) -> None:
    response = victor_client.post(
        reverse("runs:dataset_upload"),
        _upload(project, _jsonl([{"id": "a", "input": "x"}])),
    )

    assert response.status_code == 403
    assert not Dataset.objects.filter(name="questions").exists()
    assert _staged_files(tmp_path) == []


def test_upload_into_an_outsiders_project_is_not_found(
    mallory_client: Client, project: Project
) -> None:
    response = mallory_client.post(
        reverse("runs:dataset_upload"),
        _upload(project, _jsonl([{"id": "a", "input": "x"}])),
    )

    assert response.status_code == 404
    assert not Dataset.objects.filter(name="questions").exists()


def test_mapping_page_is_not_found_for_an_outsider(
    bob_client: Client, mallory_client: Client, project: Project
) -> None:
    preview_page = _stage(bob_client, project, _jsonl(ANSWER_NOT_EXPECTED))

    response = mallory_client.get(preview_page.request["PATH_INFO"])

    assert response.status_code == 404
