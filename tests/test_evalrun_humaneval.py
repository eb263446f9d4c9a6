"""evalrun over the packaged HumanEval set, scored by code_exec, in its own process."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.processes import ROOT, env_for
from tests.sandboxes import sandbox_processes


def test_evalrun_scores_the_packaged_humaneval_canonical_solutions(data_dir):
    env = env_for(data_dir)
    env["EVALSITE_PYTHON_TARGETS"] = "tests.sandboxes.canonical"
    done = subprocess.run(
        [
            sys.executable,
            "manage.py",
            "evalrun",
            "--format",
            "humaneval",
            "--target",
            "python",
            "--target-config",
            '{"callable": "tests.sandboxes.canonical"}',
            "--scorer",
            "code_exec",
            "--json",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert (summary["status"], summary["total"]) == ("completed", 164)
    assert summary["scores"] == {"code_exec": 1.0}
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
