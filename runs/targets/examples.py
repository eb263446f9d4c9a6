"""Small callables for the ``python`` target, allowlisted by default."""

from __future__ import annotations

from typing import Any

from runs.plugins.targets import TargetInput


def echo(item: TargetInput) -> Any:
    return item.input


def reverse(item: TargetInput) -> str:
    return str(item.input)[::-1]
