"""What a plain evalrun imports: nothing it does not use."""

from __future__ import annotations

import re
import sys

from tests.test_evalrun_command import run_cli, write_items

# What serves pages and the API, and libraries a plain run (exact_match over a
# JSONL file, no --baseline) has no use for: each was imported by every
# evalrun, through the app's set-up, the command's own imports or the run's end.
NOT_IMPORTED = re.compile(
    r"ninja(\..*)?"  # the API, through the app registry
    r"|runs\.(web|api|admin|urls)(\..*)?"
    r"|runs\.\w+\.(views|forms|api|urls|templatetags)"
    r"|django\.contrib\.admin\.views\.main"
    r"|runs\.management\.(gate|gate_reports)"  # only with --baseline
    r"|runs\.(evaluations|alerts)\.services"  # only when a run of an evaluation ends
    # Only by the scorers, files and secrets that use them:
    r"|(scipy|rapidfuzz|pebble|yaml|cryptography)(\..*)?"
)


def imported_by_evalrun(data_dir, tmp_path) -> set[str]:
    dataset = write_items(tmp_path / "items.jsonl", 2)
    done = run_cli(
        [
            *(sys.executable, "-X", "importtime", "manage.py", "evalrun"),
            *(str(dataset), "--target", "demo", "--scorer", "exact_match", "--json"),
        ],
        data_dir,
    )
    assert done.returncode == 0, done.stderr
    return {
        line.rsplit("|", 1)[-1].strip()
        for line in done.stderr.splitlines()
        if line.startswith("import time:")
    }


def test_a_plain_run_never_imports_scipy_stats(data_dir, tmp_path):
    imported = imported_by_evalrun(data_dir, tmp_path)

    assert "django.db.models" in imported  # the list is read
    assert "scipy.stats" not in imported


def test_a_plain_run_imports_no_web_layer_nor_unused_libraries(data_dir, tmp_path):
    imported = imported_by_evalrun(data_dir, tmp_path)

    assert "runs.executor.engine" in imported  # the list is read
    assert sorted(name for name in imported if NOT_IMPORTED.fullmatch(name)) == []
