"""manage.py holds the cyclic collector off while the apps load, and only then."""

from __future__ import annotations

import gc
import subprocess
import sys
from typing import Any

import pytest

from evalsite.collector import collector_release
from runs.analysis import result_table
from runs.models import Project
from runs.records.collector import collector_paused
from tests.factories import arithmetic_items, echo_run, make_dataset, store_outcomes
from tests.processes import ROOT, env_for


@pytest.mark.own_sqlite
def test_a_command_runs_with_the_collector_on(tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            "manage.py",
            "shell",
            "-c",
            "import gc; print(gc.isenabled())",
        ],
        cwd=ROOT,
        env=env_for(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-1] == "True"


def test_a_collector_turned_off_by_its_process_stays_off():
    gc.disable()
    try:
        collector_release()  # as the app's ready() does

        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_pause_lets_the_collector_run_again_after_it_even_on_an_error():
    assert gc.isenabled()
    with pytest.raises(KeyError), collector_paused():
        assert not gc.isenabled()
        raise KeyError("a read that failed")

    assert gc.isenabled()


def test_a_pause_leaves_a_collector_turned_off_by_another_off():
    gc.disable()  # by the process, or by another thread's pause
    try:
        with collector_paused():
            assert not gc.isenabled()

        assert not gc.isenabled()
    finally:
        gc.enable()


@pytest.mark.django_db
def test_a_run_tables_scan_pauses_the_collector_and_restores_it(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The scan's rows become arrays and hold no cycles: the collector's
    passes over them were a tenth of a run's end (bench/README.md)."""
    run = echo_run(make_dataset(project, arithmetic_items(3)))
    store_outcomes(run, [{"scores": [("exact_match", True, "")]}] * 3)
    seen: list[bool] = []
    chunks = result_table._chunks

    def watched(sql: str, params: list[Any]) -> Any:
        for rows in chunks(sql, params):
            seen.append(gc.isenabled())
            yield rows

    monkeypatch.setattr(result_table, "_chunks", watched)

    table = result_table.compute(run)

    assert len(table["ids"]) == 3
    assert seen and not any(seen)
    assert gc.isenabled()
