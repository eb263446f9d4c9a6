"""The CI gate: evalrun --baseline and evalcompare on real runs of the replay
target, called in this process.

A baseline replays each item's expected answer (every item passes); a worse
candidate replays a constant "0" (only the item whose answer is 0 passes);
an equal one replays the expected answer again.
"""

from __future__ import annotations

import io
import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import override_settings

from runs.management.gate import FAIL_ON
from runs.management.gate_flags import FAIL_ON_CHOICES
from runs.models import Project, Result, Run, RunStatus
from tests.test_evalrun_command import SUMMARY_KEYS
from tests.test_settings_distributed import settings_error

ITEMS = 10
EXPECTED = ("--target", "replay", "--field", "expected")
ZERO = ("--target", "replay", "--value", "0")
# Passes whatever the output: the scorer every candidate ties on.
ANY = 'any=regex:{"pattern": "."}'

pytestmark = pytest.mark.django_db(transaction=True)


def write_items(path: Path) -> Path:
    rows = [
        {"id": f"q{i}", "input": f"What is {i} + {i}?", "expected": str(2 * i)}
        for i in range(ITEMS)
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def command(name: str, *args: str) -> tuple[int, str, str]:
    """The exit code, stdout and stderr of a management command."""
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command(name, *args, stdout=out, stderr=err)
    except SystemExit as exc:
        return int(exc.code or 0), out.getvalue(), err.getvalue()
    return 0, out.getvalue(), err.getvalue()


def evalrun(data: Path, target: tuple[str, ...], *extra: str) -> tuple[int, str, str]:
    return command(
        "evalrun",
        str(data),
        *target,
        *("--scorer", "exact_match", "--scorer", ANY),
        *("--user", "alice", "--project", "Research"),
        *extra,
    )


@pytest.fixture
def data(tmp_path: Path, project: Project) -> Path:
    return write_items(tmp_path / "arith.jsonl")


@pytest.fixture
def baseline(data: Path) -> int:
    code, out, _ = evalrun(data, EXPECTED, "--json")
    assert code == 0
    return int(json.loads(out)["run_id"])


@pytest.fixture
def worse(data: Path) -> int:
    _, out, _ = evalrun(data, ZERO, "--json")
    return int(json.loads(out)["run_id"])


def test_a_worse_candidate_fails_the_gate_with_exit_3(
    data: Path, baseline: int
) -> None:
    code, _, err = evalrun(data, ZERO, "--baseline", str(baseline))

    assert code == 3
    assert f"against baseline run {baseline}" in err
    assert "exact_match: 100.0% -> 10.0%, delta -90.0 pp [" in err
    assert "p 0.00391 (Holm 0.00781): worse" in err
    assert "any: 100.0% -> 100.0%" in err
    assert "gate failed (--fail-on worse): exact_match" in err


def test_an_equal_candidate_passes_the_gate(data: Path, baseline: int) -> None:
    code, _, err = evalrun(data, EXPECTED, "--baseline", str(baseline))

    assert code == 0
    assert "exact_match: 100.0% -> 100.0%" in err
    assert "no significant difference" in err
    assert "gate passed (--fail-on worse)" in err


def test_json_adds_the_gate_and_keeps_the_other_keys(data: Path, baseline: int) -> None:
    code, out, _ = evalrun(data, ZERO, "--baseline", str(baseline), "--json")

    summary = json.loads(out)
    assert code == 3
    assert set(summary) == SUMMARY_KEYS | {"gate"}
    assert summary["pass_rate"] == {"exact_match": 0.1, "any": 1.0}
    assert summary["gate"] == {
        "baseline": baseline,
        "verdicts": {"exact_match": "worse", "any": "no_significant_difference"},
        "uncalibrated_judges": {},
        "failed": True,
    }


def test_without_a_baseline_the_json_has_no_gate(data: Path, baseline: int) -> None:
    _, out, _ = evalrun(data, ZERO, "--json")

    assert set(json.loads(out)) == SUMMARY_KEYS


@pytest.mark.parametrize(
    ("target", "fail_on", "code", "failed"),
    [
        (ZERO, "never", 0, False),
        (ZERO, "any-change", 3, True),
        (EXPECTED, "any-change", 0, False),
    ],
)
def test_fail_on_chooses_what_fails_the_gate(
    data: Path,
    baseline: int,
    target: tuple[str, ...],
    fail_on: str,
    code: int,
    failed: bool,
) -> None:
    done = evalrun(data, target, "--baseline", str(baseline), "--fail-on", fail_on)
    _, out, _ = evalrun(
        data, target, "--baseline", str(baseline), "--fail-on", fail_on, "--json"
    )

    assert done[0] == code
    assert json.loads(out)["gate"]["failed"] is failed


def test_any_change_fails_on_a_better_candidate(data: Path) -> None:
    _, out, _ = evalrun(data, ZERO, "--json")
    worse = json.loads(out)["run_id"]

    passes = evalrun(data, EXPECTED, "--baseline", str(worse))
    fails = evalrun(data, EXPECTED, "--baseline", str(worse), "--fail-on", "any-change")

    assert passes[0] == 0 and "better" in passes[2]
    assert fails[0] == 3
    assert "gate failed (--fail-on any-change): exact_match" in fails[2]


def bad_input(run: Any) -> str:
    with pytest.raises(CommandError) as caught:
        run()
    assert caught.value.returncode == 2
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_an_unknown_baseline_exits_2_before_any_run(data: Path) -> None:
    message = bad_input(lambda: evalrun(data, ZERO, "--baseline", "999"))

    assert message == "no baseline run 999"
    assert not Run.objects.exists()


def test_a_baseline_the_user_may_not_see_exits_2(
    data: Path, other_project: Project, mallory: User, tmp_path: Path
) -> None:
    theirs = write_items(tmp_path / "theirs.jsonl")
    _, out, _ = command(
        "evalrun",
        str(theirs),
        *EXPECTED,
        *("--scorer", "exact_match", "--user", "mallory", "--json"),
    )
    hidden = json.loads(out)["run_id"]

    message = bad_input(lambda: evalrun(data, ZERO, "--baseline", str(hidden)))

    assert message == (
        f"baseline run {hidden} is in a project user 'alice' is not a member of "
        "(--user chooses another)"
    )
    assert Run.objects.count() == 1


def test_a_baseline_over_another_dataset_exits_2_before_any_run(
    baseline: int, tmp_path: Path
) -> None:
    other = write_items(tmp_path / "other.jsonl")

    message = bad_input(lambda: evalrun(other, ZERO, "--baseline", str(baseline)))

    assert message == (
        f"--baseline: run {baseline} is over dataset 'arith' in project "
        "'Research', this run over 'other' in project 'Research': runs are "
        "compared over one dataset (any of its versions) in one project"
    )
    assert Run.objects.count() == 1


def test_a_baseline_without_a_shared_scorer_exits_2(data: Path, baseline: int) -> None:
    def run() -> Any:
        return command(
            "evalrun",
            str(data),
            *ZERO,
            *("--scorer", "numeric", "--user", "alice", "--baseline", str(baseline)),
        )

    message = bad_input(run)

    assert "has no scorer of this run's" in message
    assert Run.objects.count() == 1


def test_a_baseline_still_running_exits_2(data: Path, baseline: int) -> None:
    Run.objects.filter(pk=baseline).update(status=RunStatus.RUNNING)

    message = bad_input(lambda: evalrun(data, ZERO, "--baseline", str(baseline)))

    assert message == (
        f"baseline run {baseline} is still running: compare with a run that has ended"
    )


@pytest.mark.parametrize(
    "flag", ["--fail-on", "--report", "--junit", "--require-calibrated"]
)
def test_the_gate_flags_need_a_baseline(data: Path, flag: str) -> None:
    value = {"--fail-on": ("worse",), "--require-calibrated": ()}.get(flag, ("out",))

    message = bad_input(lambda: evalrun(data, ZERO, flag, *value))

    assert message == f"{flag} needs --baseline RUN_ID"


def test_each_fail_on_choice_says_which_verdicts_fail_the_gate() -> None:
    # The flag's choices are parsed without importing the gate.
    assert sorted(FAIL_ON) == sorted(FAIL_ON_CHOICES)


def test_a_rescore_is_gated_against_the_baseline(
    data: Path, baseline: int, worse: int
) -> None:
    code, _, err = command(
        "evalrun",
        *("--rescore", str(worse), "--scorer", "exact_match", "--user", "alice"),
        *("--baseline", str(baseline)),
    )

    assert code == 3
    assert f"run {worse} against baseline run {baseline}" in err
    assert "gate failed (--fail-on worse): exact_match" in err


def test_a_retry_against_a_baseline_still_running_changes_nothing(
    data: Path, baseline: int, worse: int
) -> None:
    Run.objects.filter(pk=baseline).update(status=RunStatus.RUNNING)
    before = Run.objects.values().get(pk=worse)

    message = bad_input(
        lambda: command(
            "evalrun",
            *("--retry", str(worse), "--status", "succeeded", "--user", "alice"),
            *("--baseline", str(baseline)),
        )
    )

    assert message.startswith(f"baseline run {baseline} is still running")
    assert Run.objects.values().get(pk=worse) == before


# -- the files ----------------------------------------------------------------------


def zero_results(run_id: int) -> dict[str, int]:
    return {
        external_id: pk
        for pk, external_id in Result.objects.filter(run_id=run_id).values_list(
            "pk", "item__external_id"
        )
    }


def test_the_markdown_report_shows_verdicts_and_the_worst_regressions(
    data: Path, baseline: int, tmp_path: Path
) -> None:
    report = tmp_path / "gate.md"

    _, out, _ = evalrun(
        data, ZERO, "--baseline", str(baseline), "--report", str(report), "--json"
    )

    candidate = json.loads(out)["run_id"]
    text = report.read_text()
    assert text.startswith("### evalsite gate: failed (exact_match)\n")
    assert (
        f"Run [{candidate}](/runs/{candidate}/) against baseline run "
        f"[{baseline}](/runs/{baseline}/)"
    ) in text
    assert "| exact_match | 100.0% | 10.0% | -90.0 pp [" in text
    assert "| 0.00391 (Holm 0.00781) | **worse** |" in text
    assert "| any | 100.0% | 100.0% | +0.0 pp [" in text
    assert "| no significant difference |" in text
    assert "**exact_match**: 9 regressions, 0 improvements" in text
    results = zero_results(candidate)
    rows = [line for line in text.splitlines() if line.startswith("| [q")]
    assert rows == [
        f"| [q{i}](/runs/{candidate}/results/{results[f'q{i}']}/) | {2 * i} | "
        f"{2 * i} | 0 |"
        for i in range(1, 6)
    ]
    assert (
        f"(/compare/?baseline={baseline}&candidates={candidate}"
        "&scorer=exact_match&change=regressions)"
    ) in text


@override_settings(EVALSITE_BASE_URL="https://evals.example.org")
def test_the_report_links_to_the_site_when_its_address_is_set(
    data: Path, baseline: int, tmp_path: Path
) -> None:
    report = tmp_path / "gate.md"

    _, out, _ = evalrun(
        data, ZERO, "--baseline", str(baseline), "--report", str(report), "--json"
    )

    candidate = json.loads(out)["run_id"]
    first = zero_results(candidate)["q1"]
    text = report.read_text()
    assert f"[q1](https://evals.example.org/runs/{candidate}/results/{first}/)" in text
    assert f"[{baseline}](https://evals.example.org/runs/{baseline}/)" in text


def test_the_sites_address_must_be_a_web_address(tmp_path: Path) -> None:
    error = settings_error(tmp_path, EVALSITE_BASE_URL="evals.example.org")

    assert "EVALSITE_BASE_URL must start with http:// or https://" in error


def test_the_junit_report_has_a_failure_for_each_worse_scorer(
    data: Path, baseline: int, tmp_path: Path
) -> None:
    junit = tmp_path / "gate.xml"

    code, out, _ = evalrun(
        data, ZERO, "--baseline", str(baseline), "--junit", str(junit), "--json"
    )

    candidate = json.loads(out)["run_id"]
    root = ET.parse(junit).getroot()
    assert code == 3
    assert root.tag == "testsuites"
    (suite,) = root.findall("testsuite")
    for element in (root, suite):
        assert element.get("tests") == "2"
        assert element.get("failures") == "1"
        assert element.get("errors") == "0"
    cases = {case.get("name"): case for case in suite.findall("testcase")}
    assert set(cases) == {"exact_match", "any"}
    assert all(case.get("classname") and case.get("time") for case in cases.values())
    failure = cases["exact_match"].find("failure")
    assert failure is not None
    assert failure.get("type") == "worse"
    assert "100.0% -> 10.0%" in (failure.get("message") or "")
    first = zero_results(candidate)["q1"]
    assert f"q1: /runs/{candidate}/results/{first}/" in (failure.text or "")
    assert cases["any"].find("failure") is None
    properties = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert properties == {
        "baseline": str(baseline),
        "candidate": str(candidate),
        "fail_on": "worse",
    }


def test_an_equal_candidates_junit_report_has_no_failure(
    data: Path, baseline: int, tmp_path: Path
) -> None:
    junit = tmp_path / "gate.xml"

    code, _, _ = evalrun(
        data, EXPECTED, "--baseline", str(baseline), "--junit", str(junit)
    )

    root = ET.parse(junit).getroot()
    assert code == 0
    assert root.get("tests") == "2" and root.get("failures") == "0"
    assert not list(root.iter("failure"))


# -- evalcompare: the same gate for two ended runs --------------------------------


def evalcompare(*args: object) -> tuple[int, str, str]:
    return command("evalcompare", *map(str, args), "--user", "alice")


def test_evalcompare_exits_3_on_a_worse_candidate_and_0_on_an_equal_one(
    baseline: int, worse: int, data: Path
) -> None:
    _, out, _ = evalrun(data, EXPECTED, "--json")
    equal = json.loads(out)["run_id"]

    failed = evalcompare(baseline, worse)
    passed = evalcompare(baseline, equal)

    assert failed[0] == 3
    assert "exact_match: 100.0% -> 10.0%" in failed[1]
    assert "gate failed (--fail-on worse): exact_match" in failed[1]
    assert passed[0] == 0
    assert "gate passed" in passed[1]


def test_evalcompare_json_holds_the_gate_and_the_rows(
    baseline: int, worse: int
) -> None:
    code, out, _ = evalcompare(baseline, worse, "--json", "--fail-on", "never")

    answer = json.loads(out)
    assert code == 0
    assert answer["gate"] == {
        "baseline": baseline,
        "verdicts": {"exact_match": "worse", "any": "no_significant_difference"},
        "uncalibrated_judges": {},
        "failed": False,
    }
    assert [row["scorer"] for row in answer["scorers"]] == ["exact_match", "any"]
    assert answer["scorers"][0]["regressions"] == 9
    assert answer["scorers"][0]["test"] == "mcnemar_exact"


def test_evalcompare_writes_the_same_files(
    baseline: int, worse: int, tmp_path: Path
) -> None:
    report, junit = tmp_path / "gate.md", tmp_path / "gate.xml"

    code, _, _ = evalcompare(baseline, worse, "--report", report, "--junit", junit)

    assert code == 3
    assert "| 0.00391 (Holm 0.00781) | **worse** |" in report.read_text()
    assert ET.parse(junit).getroot().get("failures") == "1"


def test_evalcompare_refuses_a_run_still_going_and_an_unknown_one(
    baseline: int, worse: int
) -> None:
    Run.objects.filter(pk=worse).update(status=RunStatus.RUNNING)

    running = bad_input(lambda: evalcompare(baseline, worse))
    unknown = bad_input(lambda: evalcompare(baseline, 999))

    assert running == (
        f"candidate run {worse} is still running: compare with a run that has ended"
    )
    assert unknown == "no candidate run 999"


def test_evalcompare_refuses_a_run_the_user_may_not_see(
    baseline: int, worse: int, other_project: Project
) -> None:
    message = bad_input(
        lambda: command("evalcompare", str(baseline), str(worse), "--user", "mallory")
    )

    assert message == (
        f"baseline run {baseline} is in a project user 'mallory' is not a member "
        "of (--user chooses another)"
    )
