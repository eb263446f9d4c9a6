"""evalrun --rescore as a person uses it: a separate process, one database."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.test_evalrun_command import (
    SUMMARY_KEYS,
    evalrun_args,
    query,
    run_cli,
    write_items,
)


def rescore_args(run_id: int, *extra: str) -> list[str]:
    return [sys.executable, "manage.py", "evalrun", "--rescore", str(run_id), *extra]


def first_run(data_dir: Path, fake_openai, tmp_path: Path) -> dict:
    dataset = write_items(
        tmp_path / "arith.jsonl", 6, i2="[[wrong]]", i4="[[status:400]]"
    )
    done = run_cli(
        evalrun_args(dataset, fake_openai, "--max-attempts", "1", "--json"), data_dir
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_rescore_adds_a_scorer_without_calling_the_target(
    data_dir, fake_openai, tmp_path
):
    first = first_run(data_dir, fake_openai, tmp_path)
    assert first["scores"] == {"exact_match": 0.8, "numeric": 0.8}
    requests = fake_openai.stats.requests

    done = run_cli(
        rescore_args(
            first["run_id"],
            "--scorer",
            'ends_in_1=regex:{"pattern": "1$"}',
            "--json",
        ),
        data_dir,
    )

    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert set(summary) == SUMMARY_KEYS
    assert (summary["run_id"], summary["succeeded"], summary["failed"]) == (1, 5, 1)
    # Outputs 0, 2, 41 (wrong), 6, 10: only the wrong answer ends in 1.
    assert summary["scores"] == {"exact_match": 0.8, "numeric": 0.8, "ends_in_1": 0.2}
    assert fake_openai.stats.requests == requests
    assert "re-scoring 5 results with ends_in_1" in done.stderr
    assert query(
        data_dir,
        "select status, total, scored, errored from runs_scoringpass order by id",
    ) == [("completed", 5, 5, 0), ("completed", 5, 5, 0)]


def test_rescore_replaces_a_scorer_by_name(data_dir, fake_openai, tmp_path):
    first = first_run(data_dir, fake_openai, tmp_path)

    done = run_cli(
        rescore_args(
            first["run_id"], "--scorer", 'exact_match=regex:{"pattern": "."}', "--json"
        ),
        data_dir,
    )

    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["scores"] == {"exact_match": 1.0, "numeric": 0.8}
    (scorers,) = query(data_dir, "select scorers from runs_run where id = 1")[0]
    assert [(s["name"], s["kind"]) for s in json.loads(scorers)] == [
        ("exact_match", "regex"),
        ("numeric", "numeric"),
    ]


def test_rescore_with_bad_params_exits_2_naming_the_field(
    data_dir, fake_openai, tmp_path
):
    first = first_run(data_dir, fake_openai, tmp_path)

    done = run_cli(
        rescore_args(first["run_id"], "--scorer", 'regex:{"pattern": "("}'), data_dir
    )

    assert done.returncode == 2
    assert "scorers[0].params.pattern" in done.stderr
    assert query(data_dir, "select count(*) from runs_scoringpass") == [(0,)]


def test_rescore_of_an_unknown_run_or_without_scorers_exits_2(data_dir):
    unknown = run_cli(rescore_args(99, "--scorer", "numeric"), data_dir)
    assert unknown.returncode == 2 and "no run 99" in unknown.stderr
    bare = run_cli(rescore_args(99), data_dir)
    assert bare.returncode == 2
