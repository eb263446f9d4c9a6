"""What a plain evalrun imports: nothing it does not use (scipy.stats)."""

from __future__ import annotations

import sys

from tests.test_evalrun_command import run_cli, write_items


def test_a_plain_run_never_imports_scipy_stats(data_dir, tmp_path):
    dataset = write_items(tmp_path / "items.jsonl", 2)

    done = run_cli(
        [
            *(sys.executable, "-X", "importtime", "manage.py", "evalrun"),
            *(str(dataset), "--target", "demo", "--scorer", "exact_match", "--json"),
        ],
        data_dir,
    )

    assert done.returncode == 0, done.stderr
    imported = {
        line.rsplit("|", 1)[-1].strip()
        for line in done.stderr.splitlines()
        if line.startswith("import time:")
    }
    assert "django.db.models" in imported  # the list is read
    assert "scipy.stats" not in imported
