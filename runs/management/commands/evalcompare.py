"""Compare two ended runs as the CI gate does, and exit by its outcome.

    python manage.py evalcompare BASELINE CANDIDATE [--fail-on worse] [--json]
        [--report FILE.md] [--junit FILE.xml] [--user USERNAME]

The verdicts are the comparison page's (see ``runs.management.gate``). With
``--json`` one JSON object goes to stdout: ``baseline``, ``candidate``,
``gate`` (``{"baseline", "verdicts", "failed"}``, as evalrun's) and
``scorers``, each scorer's row as the API gives it. Exit codes: 0 when the
gate passes, 3 when it fails, 2 for bad arguments (an unknown run, one the
user may not see, a run still going, runs that cannot be compared).
"""

from __future__ import annotations

import json
import sys
from argparse import ArgumentParser
from typing import Any

from runs.management.evalrun_cli import RunCommand
from runs.management.evalrun_setup import LOCAL_OPERATOR, acting_user
from runs.management.gate import gate_evaluate, gate_lines, gate_run
from runs.management.gate_flags import EXIT_GATE_FAILED, add_gate_flags
from runs.management.gate_reports import gate_files_write


class Command(RunCommand):
    help = "Compare a candidate run with a baseline run; exit 3 when the gate fails."
    exit_codes = "Exit codes: 0 gate passed, 3 gate failed, 2 bad input."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("baseline", type=int, metavar="BASELINE")
        parser.add_argument("candidate", type=int, metavar="CANDIDATE")
        parser.add_argument(
            "--user",
            metavar="USERNAME",
            help="compare as this user (default: as evalrun chooses, the only "
            f"user, else {LOCAL_OPERATOR!r}, else the only superuser)",
        )
        parser.add_argument("--json", action="store_true", help="print JSON")
        add_gate_flags(parser, baseline_flag=False)

    def handle(self, *args: Any, **opts: Any) -> None:
        user = acting_user(opts["user"])
        baseline = gate_run(user=user, run_id=opts["baseline"], role="baseline")
        candidate = gate_run(user=user, run_id=opts["candidate"], role="candidate")
        gate = gate_evaluate(
            user=user,
            baseline=baseline,
            candidate=candidate,
            fail_on=opts["fail_on"],
            require_calibrated=opts["require_calibrated"],
        )
        gate_files_write(gate, report=opts["report"], junit=opts["junit"])
        if opts["json"]:
            answer = {
                "baseline": baseline.pk,
                "candidate": candidate.pk,
                "gate": gate.as_json(),
                "scorers": [row.as_dict() for row in gate.rows],
            }
            self.stdout.write(json.dumps(answer))
        else:
            self.stdout.write("\n".join(gate_lines(gate)))
        if gate.failed:
            sys.exit(EXIT_GATE_FAILED)
