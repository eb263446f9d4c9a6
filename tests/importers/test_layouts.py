"""The MATH and GSM8K layouts: files the tests write, imported as items."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from runs.datasets.importers import Source, dataset_import, parse_items
from runs.datasets.importers.layouts import gsm8k_answer, last_boxed
from runs.errors import InvalidInput
from runs.models import Dataset, Item, Project

MATH = [
    {
        "problem": "What is $\\frac{1}{2} + \\frac{1}{4}$?",
        "level": "Level 1",
        "type": "Prealgebra",
        "solution": "We add: $\\frac{2}{4}+\\frac{1}{4}=\\boxed{\\frac{3}{4}}$.",
    },
    {
        "problem": "Find the set of roots of $x^2 = 1$.",
        "level": "Level 2",
        "type": "Algebra",
        "solution": (
            "First $\\boxed{1}$ only? No: $x = \\pm 1$, so $\\boxed{\\{-1, 1\\}}$."
        ),
    },
]
GSM8K = [
    {
        "question": "Natalia sold 48 clips in April and half as many in May. Total?",
        "answer": "In May she sold 48/2 = <<48/2=24>>24 clips.\n48+24 = 72\n#### 72",
    },
    {
        "question": "A house costs $1,200,000 and loses $20,500. What is it worth?",
        "answer": "1,200,000 - 20,500 = 1,179,500\n#### 1,179,500",
    },
]


def jsonl(rows: list[dict]) -> bytes:
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows).encode()


def write(tmp_path: Path, name: str, content: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(content)
    return path


def items_of(dataset: Dataset) -> list[tuple]:
    return list(
        Item.objects.filter(dataset=dataset)
        .order_by("index")
        .values_list("external_id", "input", "expected", "metadata")
    )


@pytest.mark.django_db
def test_math_imports_the_last_boxed_answer_and_keeps_the_rest(
    project: Project, tmp_path: Path
) -> None:
    path = write(tmp_path, "algebra.jsonl", jsonl(MATH))

    dataset = dataset_import(
        project=project,
        user=None,
        name="math",
        source=Source.from_path(path),
        format="math",
    )

    assert dataset.source_format == "math"
    rows = items_of(dataset)
    assert [(row[0], row[2]) for row in rows] == [
        ("1", "\\frac{3}{4}"),
        ("2", "\\{-1, 1\\}"),
    ]
    assert rows[0][1] == MATH[0]["problem"]
    assert rows[0][3] == {
        "level": "Level 1",
        "type": "Prealgebra",
        "solution": MATH[0]["solution"],
    }


@pytest.mark.parametrize(
    "content",
    [
        json.dumps(MATH, indent=2).encode(),  # a JSON array
        b"\xef\xbb\xbf\n" + json.dumps(MATH).encode(),  # with a BOM, one line
    ],
)
def test_math_also_reads_a_json_array(content: bytes) -> None:
    parsed = parse_items(content=content, format="math")

    assert [row.expected for row in parsed.rows] == ["\\frac{3}{4}", "\\{-1, 1\\}"]


def test_math_reads_one_pretty_printed_problem_as_shipped_per_file() -> None:
    parsed = parse_items(content=json.dumps(MATH[0], indent=4), format="math")

    assert [row.expected for row in parsed.rows] == ["\\frac{3}{4}"]


def test_gsm8k_takes_the_number_after_the_marks_without_commas() -> None:
    parsed = parse_items(content=jsonl(GSM8K), format="gsm8k")

    assert [row.expected for row in parsed.rows] == ["72", "1179500"]
    assert parsed.rows[1].input.startswith("A house costs $1,200,000")
    assert parsed.rows[0].metadata == {"answer": GSM8K[0]["answer"]}


@pytest.mark.parametrize(
    ("fmt", "records", "message"),
    [
        (
            "math",
            [MATH[0], {"problem": "p", "solution": "no box here"}],
            "line 2, field 'solution': has no \\boxed{...} answer with balanced braces",
        ),
        (
            "math",
            [{"problem": "p", "solution": "\\boxed{1"}],
            "line 1, field 'solution': has no \\boxed{...}",
        ),
        ("math", [{"solution": "\\boxed{1}"}], "line 1, field 'problem': the MATH"),
        (
            "math",
            [{"problem": 7, "solution": "\\boxed{1}"}],
            "must be a string, not a number",
        ),
        (
            "math",
            [{"problem": "p", "solution": "\\boxed{1}", "expected": "2"}],
            "line 1, field 'expected': the MATH layout makes this field itself",
        ),
        (
            "gsm8k",
            [GSM8K[0], GSM8K[1], {"question": "q", "answer": "42"}],
            "line 3, field 'answer': has no final answer after '####'",
        ),
        ("gsm8k", [{"question": "q", "answer": "#### "}], "has nothing after '####'"),
        (
            "gsm8k",
            [{"question": " ", "answer": "#### 1"}],
            "field 'question': must not be empty",
        ),
        (
            "gsm8k",
            ["a line of text"],
            "line 1: expected an object, got a string",
        ),
    ],
)
def test_a_bad_record_names_its_line_and_field(
    fmt: str, records: list, message: str
) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_items(content=jsonl(records), format=fmt)

    assert message in str(caught.value)


def test_a_bad_record_of_an_array_names_its_record() -> None:
    content = json.dumps([MATH[0], {"problem": "p", "solution": "x"}], indent=2)

    with pytest.raises(InvalidInput, match=r"record 2 \(line 8\), field 'solution'"):
        parse_items(content=content, format="math")


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        ("so $\\boxed{\\frac{1}{2}}$.", "\\frac{1}{2}"),
        ("\\boxed{3} then \\boxed{x", "3"),  # the last one never closes
        ("\\fbox{7}", "7"),
        ("\\boxed {5}", "5"),
        ("}}\\boxed{6}}}", "6"),
        ("no box", None),
        ("\\boxed{" * 100_000, None),  # many unclosed boxes: one pass
    ],
)
def test_last_boxed_balances_braces(text: str, answer: str | None) -> None:
    assert last_boxed(text) == answer


def test_gsm8k_answer_keeps_what_is_not_a_thousands_comma() -> None:
    assert gsm8k_answer("#### -1,000.5") == "-1000.5"
    assert gsm8k_answer("#### 12,34") == "12,34"
    assert gsm8k_answer("no marks") is None


@pytest.mark.django_db
def test_import_dataset_command_takes_the_layouts(
    project: Project, tmp_path: Path
) -> None:
    path = write(tmp_path, "gsm8k_test.jsonl", jsonl(GSM8K))
    out = io.StringIO()

    call_command(
        "import_dataset",
        str(path),
        "--project",
        project.name,
        "--format",
        "gsm8k",
        stdout=out,
    )

    assert "2 items, 2 with an expected answer" in out.getvalue()
    dataset = Dataset.objects.get(name="gsm8k_test")
    assert [row[2] for row in items_of(dataset)] == ["72", "1179500"]


@pytest.mark.django_db
def test_the_upload_page_offers_the_layouts_and_maps_them(
    bob_client: Client, project: Project, settings, tmp_path: Path
) -> None:
    settings.DATA_DIR = tmp_path
    page = bob_client.get(reverse("runs:dataset_upload")).content.decode()
    assert 'value="math"' in page and 'value="gsm8k"' in page

    response = bob_client.post(
        reverse("runs:dataset_upload"),
        {
            "file": SimpleUploadedFile("train.jsonl", jsonl(MATH)),
            "project": project.pk,
            "name": "math-train",
            "format": "math",
        },
    )
    mapping = bob_client.get(response.url)
    assert mapping.context["form"].initial["input_field"] == "input"
    assert mapping.context["form"].initial["expected_field"] == "expected"
    bob_client.post(
        mapping.request["PATH_INFO"],
        {"id_field": "", "input_field": "input", "expected_field": "expected"},
    )

    dataset = Dataset.objects.get(name="math-train")
    assert [row[2] for row in items_of(dataset)] == ["\\frac{3}{4}", "\\{-1, 1\\}"]
