"""evalrun --scorer with a whole spec as a JSON object (a condition, a name),
called in this process."""

from __future__ import annotations

import io
import json
from argparse import ArgumentTypeError
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError

from runs.management.evalrun_cli import EXIT_BAD_INPUT, scorer_spec
from runs.models import Dataset, Run, Score

CONDITIONAL = {
    "kind": "includes",
    "name": "contains",
    "params": {"ignore_case": True},
    "when": {"scorer": "exact_match", "passed": False},
}


def write_items(path: Path) -> Path:
    rows = [
        {"id": f"q{i}", "input": f"What is {i} + {i}?", "expected": str(2 * i)}
        for i in range(6)
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def evalrun(dataset: Path, *scorers: str) -> dict[str, object]:
    out, err = io.StringIO(), io.StringIO()
    args = [str(dataset), "--target", "demo", "--min-latency-ms", "0"]
    args += ["--max-latency-ms", "0", "--transient-error-rate", "0"]
    args += ["--accuracy", "0.5"]
    for scorer in scorers:
        args += ["--scorer", scorer]
    call_command("evalrun", *args, "--json", stdout=out, stderr=err)
    return json.loads(out.getvalue())


def test_the_three_short_forms_read_as_before() -> None:
    assert scorer_spec("exact_match") == {"kind": "exact_match"}
    assert scorer_spec('numeric:{"abs_tol": 0.5}') == {
        "kind": "numeric",
        "params": {"abs_tol": 0.5},
    }
    assert scorer_spec('loose=numeric:{"abs_tol": 1}') == {
        "kind": "numeric",
        "name": "loose",
        "params": {"abs_tol": 1},
    }


def test_a_json_object_is_the_whole_spec_as_written() -> None:
    text = "  " + json.dumps(CONDITIONAL)

    assert scorer_spec(text) == CONDITIONAL


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"kind": "includes", "when": ', "not JSON"),
        ("{'kind': 'includes'}", "not JSON"),
    ],
)
def test_a_json_spec_that_is_not_json_is_an_argument_error(
    text: str, message: str
) -> None:
    with pytest.raises(ArgumentTypeError, match=message):
        scorer_spec(text)


@pytest.mark.django_db(transaction=True)
def test_a_conditional_scorer_runs_only_where_its_condition_holds(
    alice: User, tmp_path: Path
) -> None:
    dataset = write_items(tmp_path / "cond.jsonl")

    summary = evalrun(dataset, "exact_match", json.dumps(CONDITIONAL))

    run = Run.objects.get(pk=summary["run_id"])
    assert run.scorers[1]["when"] == {"scorer": "exact_match", "passed": False}
    assert run.scorers[1]["name"] == "contains"
    scores = Score.objects.filter(result__run=run)
    exact = {s.result_id: s.passed for s in scores.filter(scorer="exact_match")}
    contains = {s.result_id: s for s in scores.filter(scorer="contains")}
    assert set(contains) == set(exact)
    for result_id, passed in exact.items():
        assert contains[result_id].skipped is bool(passed)
    assert any(exact.values()) and not all(exact.values())


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({**CONDITIONAL, "when": {"scorer": "nope", "passed": False}}, "when.scorer"),
        ({**CONDITIONAL, "when": {"scorer": "exact_match"}}, "when.passed"),
        ({**CONDITIONAL, "when": {"scorer": "exact_match", "if": 1}}, "when.if"),
        ({**CONDITIONAL, "parms": {}}, "parms"),
        ({**CONDITIONAL, "kind": "no_such_kind"}, "kind"),
        ({**CONDITIONAL, "params": {"ignore_case": "maybe"}}, "params"),
        ({**CONDITIONAL, "name": "exact_match"}, "name"),
    ],
)
def test_a_bad_json_spec_exits_2_naming_the_field_and_writes_nothing(
    alice: User, tmp_path: Path, spec: dict[str, object], field: str
) -> None:
    dataset = write_items(tmp_path / "bad.jsonl")

    with pytest.raises(CommandError) as caught:
        evalrun(dataset, "exact_match", json.dumps(spec))

    assert caught.value.returncode == EXIT_BAD_INPUT == 2
    assert f"'scorers[1].{field}" in str(caught.value)
    assert not Run.objects.exists()
    assert not Dataset.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_condition_on_a_later_scorer_is_refused(alice: User, tmp_path: Path) -> None:
    dataset = write_items(tmp_path / "order.jsonl")

    with pytest.raises(CommandError) as caught:
        evalrun(dataset, json.dumps(CONDITIONAL), "exact_match")

    assert "'scorers[0].when.scorer'" in str(caught.value)
    assert "comes after" in str(caught.value)


def test_the_help_shows_the_json_form(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        call_command("evalrun", "--help")
    help_text = " ".join(capsys.readouterr().out.split())
    assert '"when": {"scorer": NAME, "passed": false}' in help_text
