"""evalrun over the packaged HumanEval set, scored by code_exec, in its own process."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.processes import ROOT, env_for
from tests.sandboxes import sandbox_processes


@pytest.mark.parametrize(
    ("replayed", "score"),
    [
        # The acceptance: the canonical solutions pass, all 164 ...
        ({"field": "expected"}, 1.0),
        # ... and a body of `pass` passes none.
        ({"value": "    pass\n"}, 0.0),
    ],
    ids=["canonical", "pass"],
)
def test_evalrun_replays_humaneval_through_code_exec(data_dir, replayed, score):
    done = subprocess.run(
        [
            sys.executable,
            "manage.py",
            "evalrun",
            "--format",
            "humaneval",
            "--target",
            "replay",
            "--target-config",
            json.dumps(replayed),
            "--scorer",
            "code_exec",
            "--json",
        ],
        cwd=ROOT,
        env=env_for(data_dir),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert (summary["status"], summary["total"]) == ("completed", 164)
    assert (summary["succeeded"], summary["failed"]) == (164, 0)
    assert summary["scores"] == {"code_exec": score}
    assert sandbox_processes() == []


def test_evalrun_without_a_file_needs_the_humaneval_format(data_dir):
    done = subprocess.run(
        [sys.executable, "manage.py", "evalrun", "--target", "demo"],
        cwd=ROOT,
        env=env_for(data_dir),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert "give a DATASET_FILE" in done.stderr
