"""serve's flags are checked before anything is bound or started."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError


@pytest.fixture
def distributed(settings: Any) -> None:
    settings.EVALSITE_EXECUTOR = "procrastinate"
    settings.REDIS_URL = "redis://127.0.0.1:6379/0"


@pytest.mark.parametrize("processes", ["0", "-1", "65"])
def test_processes_out_of_range_are_refused(distributed: None, processes: str) -> None:
    with pytest.raises(
        CommandError, match=f"--processes must be between 1 and 64, not {processes}"
    ):
        call_command("serve", "--processes", processes)


def test_several_processes_need_redis(settings: Any) -> None:
    settings.EVALSITE_EXECUTOR = "procrastinate"
    settings.REDIS_URL = None

    with pytest.raises(CommandError, match="--processes 2 needs the distributed mode"):
        call_command("serve", "--processes", "2")


def test_an_ipv6_host_is_refused_with_what_to_do(distributed: None) -> None:
    with pytest.raises(CommandError, match=r"IPv4 addresses only.*daphne -b"):
        call_command("serve", "--host", "::1", "--processes", "2")
