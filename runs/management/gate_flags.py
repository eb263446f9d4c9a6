"""The gate's command-line flags, apart from the gate (``runs.management.gate``).

``evalrun`` parses them on every start, while the comparison behind them is
imported only when a run is compared (``--baseline``): about 30 ms of each
evalrun's start otherwise.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from runs.management.evalrun_cli import BadInput

EXIT_GATE_FAILED = 3
# When the gate fails (the verdicts each one fails on: ``gate.FAIL_ON``).
FAIL_ON_CHOICES = ("any-change", "never", "worse")
DEFAULT_FAIL_ON = "worse"


def add_gate_flags(parser: Any, *, baseline_flag: bool) -> None:
    """The gate's flags; evalrun adds ``--baseline``, evalcompare takes it as
    an argument."""
    if baseline_flag:
        parser.add_argument(
            "--baseline",
            type=int,
            metavar="RUN_ID",
            help="once the run ends, compare it with this ended run over the same "
            "dataset and print each scorer's verdict (exit 3 when the gate fails)",
        )
    parser.add_argument(
        "--fail-on",
        choices=FAIL_ON_CHOICES,
        default=None,
        help="when the gate fails: worse (the default: any scorer significantly "
        "worse), any-change (worse or better), never",
    )
    parser.add_argument(
        "--require-calibrated",
        action="store_true",
        default=None,
        help="fail the gate when a verdict rests on an LLM judge that is not "
        "calibrated against people (the project's kappa threshold over its "
        "minimum of items labelled by both)",
    )
    parser.add_argument(
        "--report",
        type=Path,
        metavar="FILE.md",
        help="write a Markdown summary of the comparison (for a pull request)",
    )
    parser.add_argument(
        "--junit",
        type=Path,
        metavar="FILE.xml",
        help="write a JUnit report: one test case per scorer",
    )


def gate_flags_check(opts: dict[str, Any]) -> None:
    """The gate's flags need a baseline (evalrun's ``--baseline``)."""
    if opts.get("baseline") is None:
        for flag in ("fail_on", "require_calibrated", "report", "junit"):
            if opts.get(flag) is not None:
                name = "--" + flag.replace("_", "-")
                raise BadInput(f"{name} needs --baseline RUN_ID")
