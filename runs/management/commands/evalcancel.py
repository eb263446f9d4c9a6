from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from runs.models import Run
from runs.results.services import run_cancel


class Command(BaseCommand):
    help = "Cancel a run from any process; its executor stops within a second."
    # Django's system checks would import every page and API schema (and
    # scipy) before the cancel is written: seconds on a busy machine, while
    # the run goes on.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("run_id", type=int)

    def handle(self, *args: Any, run_id: int, **opts: Any) -> None:
        run = Run.objects.filter(pk=run_id).first()
        if run is None:
            raise CommandError(f"no run {run_id}", returncode=2)
        if run.is_final:
            self.stdout.write(f"run {run_id} has already ended ({run.status})")
            return
        run_cancel(run=run)
        self.stdout.write(f"run {run_id}: cancel requested")
