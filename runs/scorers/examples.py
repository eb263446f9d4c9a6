"""Small functions for the ``python`` scorer, allowlisted by default."""

from __future__ import annotations

from typing import Any

from runs.plugins.targets import TargetInput


def non_empty(output: Any, item: TargetInput) -> bool:
    """Passes when the output has any text besides whitespace."""
    return output is not None and str(output).strip() != ""


async def starts_with_expected(output: Any, item: TargetInput) -> dict[str, Any]:
    """Passes when the output starts with the expected answer, case ignored.

    An async function, to show the form: a real one would wait on I/O here.
    """
    expected = str(item.expected or "").strip().casefold()
    head = str(output or "").lstrip()[: len(expected)].casefold()
    passed = bool(expected) and head == expected
    verb = "starts" if passed else "does not start"
    return {
        "value": float(passed),
        "passed": passed,
        "reason": f"the output {verb} with {expected[:100]!r}",
    }
