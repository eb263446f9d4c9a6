from __future__ import annotations

import io
import json
import threading
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command, execute_from_command_line
from django.core.management.base import CommandError
from django.db import connections

from runs.datasets.importers import store as import_store
from runs.models import Dataset, Item, Membership, Project
from runs.records import plain_rows

JSONL = (
    b'{"id": "a", "input": "2+2?", "expected": "4"}\n'
    b'{"id": "b", "input": "3*3?", "expected": "9"}\n'
)


def _run(*args: str) -> str:
    out = io.StringIO()
    call_command("import_dataset", *args, stdout=out)
    return out.getvalue()


@pytest.fixture
def jsonl_file(tmp_path: Path) -> Path:
    path = tmp_path / "arith.jsonl"
    path.write_bytes(JSONL)
    return path


@pytest.mark.django_db
def test_command_imports_a_file_and_prints_a_summary(
    project: Project, jsonl_file: Path
) -> None:
    output = _run(str(jsonl_file), "--project", "Research")

    dataset = Dataset.objects.get()
    assert (dataset.project, dataset.name, dataset.version) == (project, "arith", 1)
    assert dataset.source_name == "arith.jsonl"
    assert dataset.created_by is None
    assert dataset.items.count() == 2
    assert output.strip() == (
        f"imported arith v1: 2 items, 2 with an expected answer "
        f"(hash {dataset.content_hash[:12]})"
    )


@pytest.mark.django_db
def test_command_takes_name_format_fields_and_description(
    project: Project, tmp_path: Path
) -> None:
    path = tmp_path / "export.txt"
    path.write_bytes(b"qid,question,answer\n1,hi,yo\n")

    _run(
        str(path),
        "--project=Research",
        "--name=greetings",
        "--format=csv",
        "--id-field=qid",
        "--input-field=question",
        "--expected-field=answer",
        "--description=Hello.",
    )

    dataset = Dataset.objects.get()
    assert (dataset.name, dataset.source_format, dataset.description) == (
        "greetings",
        "csv",
        "Hello.",
    )
    assert list(dataset.items.values_list("external_id", "input", "expected")) == [
        ("1", "hi", "yo")
    ]


@pytest.mark.django_db
def test_command_second_import_is_version_two(
    project: Project, jsonl_file: Path
) -> None:
    _run(str(jsonl_file), "--project", "Research")

    output = _run(str(jsonl_file), "--project", "Research")

    assert output.startswith("imported arith v2: 2 items")


@pytest.mark.django_db
def test_command_bad_line_fails_naming_it_and_stores_nothing(
    project: Project, tmp_path: Path
) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_bytes(JSONL + b'{"id": "c", "input": }\n')

    with pytest.raises(CommandError, match=r"^line 3: invalid JSON"):
        _run(str(path), "--project", "Research")

    assert Dataset.objects.count() == 0
    assert Item.objects.count() == 0


# From the command line, Django closes every connection on the way out: a
# transactional test can reconnect afterwards, one wrapped in a transaction not.
@pytest.mark.django_db(transaction=True)
def test_command_exits_non_zero_on_bad_input(
    project: Project, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.csv"
    path.write_bytes(b"id,question\n1,hi\n")
    command = ["manage.py", "import_dataset", str(path), "--project", "Research"]

    with pytest.raises(SystemExit) as info:
        execute_from_command_line(command)

    assert info.value.code != 0
    assert "line 2, field 'input'" in capsys.readouterr().err
    assert Dataset.objects.count() == 0


@pytest.mark.django_db
def test_command_refuses_an_unknown_project(jsonl_file: Path) -> None:
    with pytest.raises(CommandError, match="--create-project"):
        _run(str(jsonl_file), "--project", "Nowhere")

    assert Project.objects.count() == 0


@pytest.mark.django_db
def test_command_creates_the_project_with_its_owner(
    alice: User, jsonl_file: Path
) -> None:
    _run(str(jsonl_file), "--project=New", "--create-project", "--owner=alice")

    project = Project.objects.get(name="New")
    assert project.datasets.get().item_count == 2
    membership = Membership.objects.get(project=project)
    assert (membership.user, membership.role) == (alice, Membership.Role.ADMIN)


@pytest.mark.django_db
def test_command_creates_no_project_when_the_file_is_bad(
    alice: User, tmp_path: Path
) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b"")

    with pytest.raises(CommandError, match="no items"):
        _run(str(path), "--project=New", "--create-project", "--owner=alice")

    assert Project.objects.count() == 0
    assert Membership.objects.count() == 0


@pytest.mark.django_db
def test_command_creates_no_project_without_an_owner(
    alice: User, jsonl_file: Path
) -> None:
    with pytest.raises(CommandError, match="needs --owner"):
        _run(str(jsonl_file), "--project=New", "--create-project")

    assert Project.objects.count() == 0


@pytest.mark.django_db
def test_command_refuses_an_unknown_owner(jsonl_file: Path) -> None:
    with pytest.raises(CommandError, match="no user named 'nobody'"):
        _run(str(jsonl_file), "--project=New", "--create-project", "--owner=nobody")

    assert Project.objects.count() == 0


@pytest.mark.django_db
def test_command_imports_humaneval_without_a_file(project: Project) -> None:
    output = _run("--format", "humaneval", "--project", "Research")

    dataset = Dataset.objects.get()
    assert (dataset.name, dataset.item_count) == ("humaneval", 164)
    assert output.startswith("imported humaneval v1: 164 items")


@pytest.mark.django_db
def test_command_needs_a_file_for_other_formats(project: Project) -> None:
    with pytest.raises(CommandError, match="give a FILE"):
        _run("--format", "jsonl", "--project", "Research")


@pytest.mark.django_db
def test_command_reports_an_unreadable_file(project: Project, tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="cannot read"):
        _run(str(tmp_path / "missing.jsonl"), "--project", "Research")


@pytest.mark.django_db
def test_command_refuses_an_expected_field_no_item_has(
    project: Project, tmp_path: Path
) -> None:
    path = tmp_path / "qa.jsonl"
    path.write_bytes(b'{"id": "a", "input": "2+2?", "answer": "4"}\n')

    with pytest.raises(CommandError) as info:
        _run(str(path), "--project", "Research")

    message = str(info.value)
    assert "no item has a value for 'expected'" in message
    assert "'id', 'input', 'answer'" in message
    assert message.endswith("(--expected-field NAME, or --no-expected)")
    assert Dataset.all_objects.count() == 0


@pytest.mark.django_db
def test_command_imports_without_expected_answers_when_told(
    project: Project, tmp_path: Path
) -> None:
    path = tmp_path / "poems.jsonl"
    path.write_bytes(b'{"id": "a", "input": "Write a poem."}\n')

    output = _run(str(path), "--project", "Research", "--no-expected")

    assert Dataset.objects.get().expected_count == 0
    assert "1 items, 0 with an expected answer" in output


@pytest.mark.django_db(transaction=True)
def test_command_commits_items_in_batches(
    project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One transaction for the whole import kept every other writer waiting."""
    monkeypatch.setattr(import_store, "BATCH_SIZE", 10)
    path = tmp_path / "many.jsonl"
    path.write_text(
        "\n".join(
            json.dumps({"id": f"q{n}", "input": f"{n}?", "expected": str(n)})
            for n in range(25)
        )
    )
    committed: list[int] = []
    insert = plain_rows.insert
    inserts = 0

    def count_committed() -> None:
        try:
            committed.append(Item.objects.count())
        finally:
            connections.close_all()

    def counted(table: plain_rows.Table, rows: Any, **kwargs: Any) -> Any:
        # Before the third batch of items (an INSERT, or COPY on PostgreSQL).
        nonlocal inserts
        if table.table == Item._meta.db_table:
            inserts += 1
            if inserts == 3:
                reader = threading.Thread(target=count_committed)
                reader.start()
                reader.join()
        return insert(table, rows, **kwargs)

    monkeypatch.setattr(plain_rows, "insert", counted)
    _run(str(path), "--project", "Research")

    assert committed == [20]
    assert Dataset.objects.get().items.count() == 25
