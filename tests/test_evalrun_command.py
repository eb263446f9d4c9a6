"""evalrun and evalcancel as a person uses them: separate processes, one database."""

from __future__ import annotations

import json
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from runs.testing.fake_openai import FakeOpenAIServer
from tests.processes import ROOT, env_for

SUMMARY_KEYS = {
    "run_id",
    "status",
    "total",
    "succeeded",
    "failed",
    "timed_out",
    "cancelled",
    "skipped",
    "wall_seconds",
    "pass_rate",
    "score_means",
    "scores",
}


def write_items(path: Path, count: int, marker: str = "", **marks: str) -> Path:
    with path.open("w") as f:
        for i in range(count):
            suffix = marks.get(f"i{i}", marker)
            row = {
                "id": f"q{i}",
                "input": f"What is {i} + {i}?{suffix}",
                "expected": str(2 * i),
            }
            f.write(json.dumps(row) + "\n")
    return path


def evalrun_args(dataset: Path, server: FakeOpenAIServer, *extra: str) -> list[str]:
    return [
        sys.executable,
        "manage.py",
        "evalrun",
        str(dataset),
        "--target",
        "openai_chat",
        "--base-url",
        server.base_url,
        "--model",
        "fake",
        "--scorer",
        "exact_match",
        "--scorer",
        "numeric",
        *extra,
    ]


def run_cli(args: list[str], data_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        args,
        cwd=ROOT,
        env=env_for(data_dir),
        capture_output=True,
        text=True,
        timeout=120,
    )


def count_results(data_dir: Path, run_id: int) -> int:
    with sqlite3.connect(data_dir / "evalsite.sqlite3", timeout=30) as db:
        (n,) = db.execute(
            "select count(*) from runs_result where run_id = ?", (run_id,)
        ).fetchone()
    return n


def test_evalrun_json_reports_the_contract(data_dir, fake_openai, tmp_path):
    dataset = write_items(
        tmp_path / "arith.jsonl", 25, i3="[[wrong]]", i4="[[status:400]]"
    )
    done = run_cli(
        evalrun_args(dataset, fake_openai, "--concurrency", "8", "--json"), data_dir
    )

    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[0] == "run 1 started"
    summary = json.loads(done.stdout)
    assert set(summary) == SUMMARY_KEYS
    assert summary["status"] == "completed_with_errors"
    assert (summary["total"], summary["succeeded"], summary["failed"]) == (25, 24, 1)
    assert summary["skipped"] == summary["timed_out"] == summary["cancelled"] == 0
    # The headline figure counts the failed call as not passed; the mean is
    # over the scored results only, and says so.
    assert summary["pass_rate"] == {"exact_match": 23 / 25, "numeric": 23 / 25}
    assert summary["score_means"] == {"exact_match": 23 / 24, "numeric": 23 / 24}
    assert summary["scores"] == summary["score_means"]  # its former name
    assert summary["wall_seconds"] > 0


def test_evalrun_prints_the_pass_rate_and_the_mean_named_so(
    data_dir, fake_openai, tmp_path
):
    dataset = write_items(tmp_path / "four.jsonl", 4, i3="[[status:400]]")
    done = run_cli(evalrun_args(dataset, fake_openai), data_dir)

    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert re.match(r"run \d+ completed_with_errors: 3 answered, 1 failed, ", lines[-5])
    assert (
        "pass rate: exact_match 75.0% (3/4 passed), numeric 75.0% (3/4 passed)" in lines
    )
    assert "mean score: exact_match 1.000, numeric 1.000" in lines


def test_evalrun_prints_the_time_to_result_and_the_failed_attempts(
    data_dir, fake_openai, tmp_path
):
    # The second item's first call fails (a 500) and its retry answers: the
    # last attempt's latency hides the failure, the time to result does not.
    dataset = write_items(tmp_path / "three.jsonl", 3, i1="[[flaky:1]]")
    done = run_cli(evalrun_args(dataset, fake_openai), data_dir)

    assert done.returncode == 0, done.stderr
    timing = next(line for line in done.stderr.splitlines() if "time to" in line)
    assert re.fullmatch(
        r"time to result: p50 \d+\.\d\d s, p90 \d+\.\d\d s "
        r"\(last attempt p50 \d+\.\d\d s\); failed attempts: 1 \(1 transient\)",
        timing,
    )


def test_evalrun_reuses_an_identical_dataset(data_dir, fake_openai, tmp_path):
    dataset = write_items(tmp_path / "same.jsonl", 3)
    for _ in range(2):
        assert (
            run_cli(evalrun_args(dataset, fake_openai, "--json"), data_dir).returncode
            == 0
        )
    with sqlite3.connect(data_dir / "evalsite.sqlite3") as db:
        assert db.execute("select count(*) from runs_dataset").fetchone() == (1,)
        assert db.execute("select count(*) from runs_run").fetchone() == (2,)


def test_evalrun_exits_1_when_the_run_fails(data_dir, fake_openai, tmp_path):
    dataset = write_items(tmp_path / "bad.jsonl", 4, marker="[[status:404]]")
    done = run_cli(evalrun_args(dataset, fake_openai, "--json"), data_dir)
    assert done.returncode == 1
    assert json.loads(done.stdout)["status"] == "failed"


def test_evalrun_exits_2_on_a_bad_line_naming_it(data_dir, fake_openai, tmp_path):
    dataset = write_items(tmp_path / "broken.jsonl", 3)
    with dataset.open("a") as f:
        f.write("{not json\n")
    done = run_cli(evalrun_args(dataset, fake_openai, "--json"), data_dir)
    assert done.returncode == 2
    assert "line 4" in done.stderr
    assert done.stdout == ""


def test_evalrun_exits_2_on_bad_arguments(data_dir, fake_openai, tmp_path):
    dataset = write_items(tmp_path / "ok.jsonl", 2)
    no_scorer = [
        a for a in evalrun_args(dataset, fake_openai) if a not in ("--scorer",)
    ]
    no_scorer = no_scorer[: no_scorer.index("exact_match")]
    assert run_cli(no_scorer, data_dir).returncode == 2
    bad_number = evalrun_args(dataset, fake_openai, "--concurrency", "zero")
    assert run_cli(bad_number, data_dir).returncode == 2
    out_of_range = evalrun_args(dataset, fake_openai, "--concurrency", "0")
    done = run_cli(out_of_range, data_dir)
    assert done.returncode == 2 and "concurrency" in done.stderr


def start_evalrun(args: list[str], data_dir: Path) -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen(
        args,
        cwd=ROOT,
        env=env_for(data_dir),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    first = proc.stderr.readline().strip()
    assert first.startswith("run ") and first.endswith(" started"), first
    return proc, int(first.split()[1])


def wait_until(predicate, seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.05)


def test_evalcancel_from_another_process_stops_the_run(data_dir, fake_openai, tmp_path):
    # The slow calls outlast any wait for the cancel (its process may start
    # slowly on a busy machine): the cancel ends them, not their latency.
    dataset = write_items(
        tmp_path / "slow.jsonl", 30, marker="[[latency:600000]]", i0="", i1=""
    )
    proc, run_id = start_evalrun(
        evalrun_args(
            dataset, fake_openai, "--concurrency", "3", "--timeout", "900", "--json"
        ),
        data_dir,
    )
    wait_until(
        lambda: (
            count_results(data_dir, run_id) == 2 and fake_openai.stats.in_flight == 3
        ),
        seconds=600,
    )

    cancel = run_cli([sys.executable, "manage.py", "evalcancel", str(run_id)], data_dir)
    assert cancel.returncode == 0, cancel.stderr
    out, err = proc.communicate(timeout=60)

    assert proc.returncode == 0, err
    summary = json.loads(out)
    assert summary["status"] == "cancelled"
    assert (summary["succeeded"], summary["cancelled"], summary["skipped"]) == (
        2,
        3,
        25,
    )
    wait_until(lambda: fake_openai.stats.disconnects == 3)


def test_sigkill_then_resume_loses_nothing_and_duplicates_nothing(
    data_dir, fake_openai, tmp_path
):
    dataset = write_items(tmp_path / "kill.jsonl", 60, marker="[[latency:150]]")
    proc, run_id = start_evalrun(
        evalrun_args(dataset, fake_openai, "--concurrency", "4", "--json"), data_dir
    )
    wait_until(lambda: count_results(data_dir, run_id) >= 12)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    stored_before = count_results(data_dir, run_id)
    requests_before = fake_openai.stats.requests

    done = run_cli(
        [sys.executable, "manage.py", "evalrun", "--resume", str(run_id), "--json"],
        data_dir,
    )

    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert (summary["status"], summary["succeeded"], summary["total"]) == (
        "completed",
        60,
        60,
    )
    with sqlite3.connect(data_dir / "evalsite.sqlite3") as db:
        rows = db.execute(
            "select item_id, epoch, count(*) from runs_result where run_id = ? "
            "group by item_id, epoch",
            (run_id,),
        ).fetchall()
    assert len(rows) == 60 and all(n == 1 for _, _, n in rows)
    # Only items without a stored result were sent again.
    assert fake_openai.stats.requests - requests_before == 60 - stored_before


def demo_args(dataset: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "manage.py",
        "evalrun",
        str(dataset),
        "--target",
        "demo",
        "--json",
        *extra,
    ]


def query(data_dir: Path, sql: str, *params: object) -> list[tuple]:
    with sqlite3.connect(data_dir / "evalsite.sqlite3", timeout=30) as db:
        return db.execute(sql, params).fetchall()


def test_evalrun_puts_the_run_in_a_project_its_user_administers(data_dir, tmp_path):
    dataset = write_items(tmp_path / "mine.jsonl", 2)

    done = run_cli(demo_args(dataset, "--scorer", "exact_match"), data_dir)

    assert done.returncode == 0, done.stderr
    members = query(
        data_dir,
        "select u.username, m.role from runs_run r "
        "join runs_membership m on m.project_id = r.project_id "
        "join auth_user u on u.id = m.user_id",
    )
    assert members == [("researcher", "admin")]
    assert query(data_dir, "select created_by_id is not null from runs_run") == [(1,)]


def test_evalrun_asks_for_a_user_when_several_exist(data_dir, tmp_path):
    dataset = write_items(tmp_path / "who.jsonl", 2)
    run_cli(
        [
            sys.executable,
            "manage.py",
            "shell",
            "-c",
            "from django.contrib.auth import get_user_model; "
            "get_user_model().objects.create_user('second')",
        ],
        data_dir,
    )

    done = run_cli(demo_args(dataset, "--scorer", "exact_match"), data_dir)

    assert done.returncode == 2
    assert "--user USERNAME" in done.stderr
    assert query(data_dir, "select count(*) from runs_project") == [(0,)]
    as_second = demo_args(dataset, "--scorer", "exact_match", "--user", "second")
    assert run_cli(as_second, data_dir).returncode == 0


def test_evalrun_takes_scorer_parameters(data_dir, tmp_path):
    dataset = write_items(tmp_path / "params.jsonl", 3)

    done = run_cli(
        demo_args(
            dataset,
            "--scorer",
            'regex:{"pattern": "^-?\\\\d+$", "mode": "fullmatch"}',
            "--scorer",
            'loose=numeric:{"abs_tol": 0.5}',
        ),
        data_dir,
    )

    assert done.returncode == 0, done.stderr
    (scorers,) = query(data_dir, "select scorers from runs_run")[0]
    specs = {spec["name"]: spec for spec in json.loads(scorers)}
    assert specs["regex"]["params"]["pattern"] == "^-?\\d+$"
    assert specs["loose"]["kind"] == "numeric"
    assert specs["loose"]["params"]["abs_tol"] == 0.5


def test_evalrun_refuses_scorers_needing_answers_the_file_lacks(data_dir, tmp_path):
    dataset = tmp_path / "bare.jsonl"
    dataset.write_text('{"id": "a", "input": "1 + 1"}\n')

    done = run_cli(demo_args(dataset, "--scorer", "exact_match"), data_dir)

    assert done.returncode == 2
    assert "expected answer" in done.stderr
    assert query(data_dir, "select count(*) from runs_run") == [(0,)]
    assert query(data_dir, "select count(*) from runs_dataset") == [(0,)]


def test_evalrun_retry_reruns_failed_items_in_the_same_run(
    data_dir, fake_openai, tmp_path
):
    dataset = write_items(
        tmp_path / "flaky.jsonl", 6, i1="[[flaky:1]]", i4="[[flaky:1]]"
    )
    first = run_cli(
        evalrun_args(dataset, fake_openai, "--max-attempts", "1", "--json"), data_dir
    )
    assert json.loads(first.stdout)["failed"] == 2
    ids_before = query(data_dir, "select id from runs_result order by id")
    requests_before = fake_openai.stats.requests

    done = run_cli(
        [
            sys.executable,
            "manage.py",
            "evalrun",
            "--retry",
            "1",
            "--status",
            "failed",
            "--json",
        ],
        data_dir,
    )

    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert set(summary) == SUMMARY_KEYS
    assert (summary["run_id"], summary["status"]) == (1, "completed")
    assert (summary["succeeded"], summary["failed"], summary["total"]) == (6, 0, 6)
    assert query(data_dir, "select id from runs_result order by id") == ids_before
    assert fake_openai.stats.requests - requests_before == 2
    assert "retrying 2 items" in done.stderr


def test_evalrun_retry_keeps_the_runs_time_and_refuses_scored_answers(
    data_dir, fake_openai, tmp_path
):
    dataset = write_items(tmp_path / "flaky.jsonl", 4, i2="[[flaky:1]]")
    first = run_cli(
        evalrun_args(dataset, fake_openai, "--max-attempts", "1", "--json"), data_dir
    )
    wall_seconds = json.loads(first.stdout)["wall_seconds"]
    retry = [sys.executable, "manage.py", "evalrun", "--retry", "1", "--json"]

    refused = run_cli([*retry, "--status", "succeeded"], data_dir)
    assert refused.returncode == 2
    assert "answered and scored" in refused.stderr

    done = run_cli([*retry, "--status", "failed"], data_dir)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["wall_seconds"] == wall_seconds
    assert query(data_dir, "select replaced, kept from runs_retrypass") == [(1, 0)]


def test_evalrun_retry_of_an_unknown_run_exits_2(data_dir, tmp_path):
    done = run_cli(
        [sys.executable, "manage.py", "evalrun", "--retry", "99", "--json"], data_dir
    )
    assert done.returncode == 2
    assert "no run 99" in done.stderr


def test_evalrun_json_says_why_the_run_failed_on_stderr(
    data_dir, fake_openai, tmp_path
):
    dataset = write_items(tmp_path / "bad.jsonl", 4, marker="[[status:404]]")

    done = run_cli(evalrun_args(dataset, fake_openai, "--json"), data_dir)

    assert done.returncode == 1
    assert set(json.loads(done.stdout)) == SUMMARY_KEYS
    assert "error: all 4 items failed" in done.stderr
