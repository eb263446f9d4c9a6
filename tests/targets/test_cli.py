"""The new target kinds from the command line, as a person types them."""

from __future__ import annotations

import json
import sys

from tests.test_evalrun_command import run_cli, write_items


def evalrun(dataset, *args: str) -> list[str]:
    return [sys.executable, "manage.py", "evalrun", str(dataset), *args, "--json"]


def test_replay_scores_the_stored_answers(data_dir, tmp_path):
    dataset = write_items(tmp_path / "answers.jsonl", 4)
    done = run_cli(
        evalrun(
            dataset,
            "--target",
            "replay",
            "--field",
            "expected",
            "--scorer",
            "exact_match",
        ),
        data_dir,
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert (summary["status"], summary["succeeded"]) == ("completed", 4)
    assert summary["scores"] == {"exact_match": 1.0}


def test_a_chained_run_takes_the_first_runs_outputs(data_dir, fake_openai, tmp_path):
    dataset = write_items(tmp_path / "arith.jsonl", 3)
    model = {"base_url": fake_openai.base_url, "model": "fake"}
    first = run_cli(
        evalrun(
            dataset,
            "--target",
            "openai_chat",
            "--target-config",
            json.dumps(model),
            "--scorer",
            "exact_match",
        ),
        data_dir,
    )
    assert first.returncode == 0, first.stderr
    run_id = json.loads(first.stdout)["run_id"]
    config = {
        "run": run_id,
        "target": {"kind": "openai_chat", "config": model},
        "template": "What is {run.output} * 1?",
    }
    second = run_cli(
        evalrun(
            dataset,
            "--target",
            "chain",
            "--target-config",
            json.dumps(config),
            "--scorer",
            "exact_match",
        ),
        data_dir,
    )
    assert second.returncode == 0, second.stderr
    summary = json.loads(second.stdout)
    assert (summary["status"], summary["succeeded"]) == ("completed", 3)
    assert summary["scores"] == {"exact_match": 1.0}
    assert fake_openai.stats.prompts["What is 4 * 1?"] == 1
