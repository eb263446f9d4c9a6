"""evalworker's --shards, and --concurrency, its old name, which still works."""

from __future__ import annotations

import io
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError


@pytest.fixture
def distributed(settings: Any) -> None:
    # The flag is checked before the worker reaches the database.
    settings.EVALSITE_EXECUTOR = "procrastinate"


def test_shards_sets_the_shards_a_worker_executes_at_once(distributed: None) -> None:
    stderr = io.StringIO()

    with pytest.raises(CommandError, match="--shards must be between 1 and 64, not 65"):
        call_command("evalworker", "--shards", "65", stderr=stderr)

    assert "--concurrency" not in stderr.getvalue()


def test_concurrency_still_sets_shards_and_names_the_new_flag(
    distributed: None,
) -> None:
    stderr = io.StringIO()

    with pytest.raises(CommandError, match="--shards must be between 1 and 64, not 65"):
        call_command("evalworker", "--concurrency", "65", stderr=stderr)

    assert "--concurrency is now --shards" in stderr.getvalue()


def test_the_help_lists_only_shards(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        call_command("evalworker", "--help")

    shown = capsys.readouterr().out
    assert "--shards" in shown
    assert "--concurrency" not in shown
