"""Run an evaluation from the terminal, in this process, into the dashboard's database.

    python manage.py evalrun DATASET_FILE --target openai_chat --base-url URL \\
        --model NAME --scorer exact_match [--json]
    python manage.py evalrun --resume RUN_ID [--json]

The first line on stderr is ``run <id> started``. With ``--json`` one JSON
object goes to stdout. Exit codes: 0 when the run ends completed,
completed_with_errors or cancelled; 1 when it ends failed; 2 for bad
arguments or input.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import time
from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from runs import selectors, services
from runs.errors import DomainError
from runs.executor.engine import Execution, execute_run
from runs.models import HEARTBEAT_STALE_SECONDS, Project, Run, RunStatus
from runs.reports import run_score_means

EXIT_BAD_INPUT = 2
CLAIM_POLL_SECONDS = 0.5


class BadInput(CommandError):
    def __init__(self, message: str) -> None:
        super().__init__(message, returncode=EXIT_BAD_INPUT)


class Command(BaseCommand):
    help = "Import a dataset file, run it against a target and report, in this process."

    def create_parser(
        self, prog_name: str, subcommand: str, **kwargs: Any
    ) -> CommandParser:
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        parser.epilog = (
            "Exit codes: 0 completed/with errors/cancelled, 1 failed, 2 bad input."
        )
        return parser

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "dataset_file", nargs="?", help="JSONL, CSV, JSON or YAML file"
        )
        parser.add_argument("--resume", type=int, metavar="RUN_ID", help="resume a run")
        parser.add_argument(
            "--format", help="file format (default: from the extension)"
        )
        parser.add_argument("--name", help="dataset name (default: the file's stem)")
        parser.add_argument("--id-field", default="id")
        parser.add_argument("--input-field", default="input")
        parser.add_argument("--expected-field", default="expected")
        parser.add_argument("--project", default="Default", help="project name")
        parser.add_argument(
            "--target",
            default="openai_chat",
            help="target kind: openai_chat, python, demo",
        )
        parser.add_argument("--base-url", help="OpenAI-compatible base URL (…/v1)")
        parser.add_argument("--model", help="model name")
        parser.add_argument(
            "--api-key-secret",
            default="",
            help="name of the project secret holding the key",
        )
        parser.add_argument(
            "--api-key-env",
            default="",
            help="env variable holding the key (only one listed in "
            "EVALSITE_ENV_SECRETS)",
        )
        parser.add_argument("--system-prompt", default="")
        parser.add_argument("--prompt-template", default="{input}")
        parser.add_argument("--temperature", type=float)
        parser.add_argument("--max-tokens", type=int)
        parser.add_argument("--callable", help="dotted path, for --target python")
        parser.add_argument(
            "--scorer", action="append", default=[], help="scorer kind (repeatable)"
        )
        parser.add_argument("--concurrency", type=int)
        parser.add_argument("--timeout", type=float, help="seconds per attempt")
        parser.add_argument("--max-attempts", type=int)
        parser.add_argument("--epochs", type=int)
        parser.add_argument("--deadline", type=float, help="seconds for the whole run")
        parser.add_argument(
            "--retry-budget", type=int, help="retries for the whole run"
        )
        parser.add_argument("--rate-limit-rpm", type=float, help="requests a minute")
        parser.add_argument(
            "--no-adaptive-concurrency",
            action="store_true",
            help="keep the concurrency when the endpoint answers 429",
        )
        parser.add_argument(
            "--fail-fast",
            type=float,
            metavar="RATE",
            help="stop once this fraction of items failed",
        )
        parser.add_argument("--fail-fast-min-items", type=int)
        parser.add_argument("--run-name", default="")
        parser.add_argument("--json", action="store_true", help="print a JSON summary")

    def handle(self, *args: Any, **opts: Any) -> None:
        try:
            run = (
                self.resumable(opts["resume"]) if opts["resume"] else self.create(opts)
            )
        except DomainError as exc:
            raise BadInput(str(exc)) from None
        self.stderr.write(f"run {run.pk} started")
        self.stderr.flush()
        status = asyncio.run(self.run_to_end(run, quiet=not sys.stderr.isatty()))
        run.refresh_from_db()
        if status is None:
            raise CommandError(
                f"run {run.pk} is held by a live executor ({run.executor_id})"
            )
        summary = report(run)
        if opts["json"]:
            self.stdout.write(json.dumps(summary))
        else:
            self.stderr.write(human_summary(summary, run))
        if run.status == RunStatus.FAILED:
            sys.exit(1)

    # -- setting up ------------------------------------------------------------

    def resumable(self, run_id: int) -> Run:
        run = Run.objects.filter(pk=run_id).first()
        if run is None:
            raise BadInput(f"no run {run_id}")
        if run.is_final:
            raise BadInput(f"run {run_id} has already ended ({run.status})")
        return run

    def create(self, opts: dict[str, Any]) -> Run:
        from runs.importers import dataset_import

        file = opts["dataset_file"]
        if not file:
            raise BadInput("give a DATASET_FILE or --resume RUN_ID")
        path = Path(file)
        if not path.is_file():
            raise BadInput(f"{file}: no such file")
        if not opts["scorer"]:
            raise BadInput("give at least one --scorer")
        project, _ = Project.objects.get_or_create(name=opts["project"])
        with transaction.atomic():
            dataset = dataset_import(
                project=project,
                user=None,
                name=opts["name"] or path.stem,
                content=path.read_bytes(),
                format=opts["format"],
                filename=path.name,
                id_field=opts["id_field"],
                input_field=opts["input_field"],
                expected_field=opts["expected_field"],
                reuse_identical=True,
            )
            options = {
                "concurrency": opts["concurrency"],
                "timeout_seconds": opts["timeout"],
                "max_attempts": opts["max_attempts"],
                "epochs": opts["epochs"],
                "deadline_seconds": opts["deadline"],
                "retry_budget": opts["retry_budget"],
                "rate_limit_rpm": opts["rate_limit_rpm"],
                "adaptive_concurrency": not opts["no_adaptive_concurrency"],
                "fail_fast_error_rate": opts["fail_fast"],
                "fail_fast_min_items": opts["fail_fast_min_items"],
            }
            return services.run_create(
                user=None,
                dataset=dataset,
                target_kind=opts["target"],
                target_config=target_config(opts),
                scorers=opts["scorer"],
                options={k: v for k, v in options.items() if v is not None},
                name=opts["run_name"],
                launch=False,
            )

    # -- executing -------------------------------------------------------------

    async def run_to_end(self, run: Run, *, quiet: bool) -> str | None:
        executions: list[Execution] = []
        loop = asyncio.get_running_loop()

        def on_start(execution: Execution) -> None:
            executions.append(execution)
            # Ctrl-C cancels like the dashboard's button: finished results stay.
            loop.add_signal_handler(signal.SIGINT, execution.request_cancel)
            loop.add_signal_handler(signal.SIGTERM, execution.request_cancel)

        progress = None if quiet else asyncio.create_task(show_progress(run.pk))
        try:
            deadline = time.monotonic() + HEARTBEAT_STALE_SECONDS + 5
            while True:
                status = await execute_run(run.pk, on_start=on_start)
                if status is not None or time.monotonic() > deadline:
                    return status
                # Another executor held it; wait until it is gone or stale.
                if await asyncio.to_thread(lambda: Run.objects.get(pk=run.pk).is_final):
                    return None
                await asyncio.sleep(CLAIM_POLL_SECONDS)
        finally:
            if progress is not None:
                progress.cancel()


def target_config(opts: dict[str, Any]) -> dict[str, Any]:
    kind = opts["target"]
    if kind == "openai_chat":
        config = {
            "base_url": opts["base_url"] or "",
            "model": opts["model"] or "",
            "api_key_secret": opts["api_key_secret"],
            "api_key_env": opts["api_key_env"],
            "system_prompt": opts["system_prompt"],
            "prompt_template": opts["prompt_template"],
            "temperature": opts["temperature"],
            "max_tokens": opts["max_tokens"],
        }
        return {k: v for k, v in config.items() if v is not None}
    if kind == "python":
        return {"callable": opts["callable"] or ""}
    return {}


async def show_progress(run_id: int) -> None:
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    columns = (
        TextColumn(f"run {run_id}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[detail]}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )
    from rich.console import Console

    with Progress(*columns, console=Console(stderr=True), transient=False) as bar:
        task = bar.add_task("run", total=None, detail="")
        while True:
            run = await asyncio.to_thread(Run.objects.get, pk=run_id)
            detail = f"failed {run.failed} · timed out {run.timed_out}"
            bar.update(task, total=run.total, completed=run.processed, detail=detail)
            await asyncio.sleep(0.25)


def report(run: Run) -> dict[str, Any]:
    """The ``--json`` summary: exactly these keys."""
    return {
        "run_id": run.pk,
        "status": run.status,
        "total": run.total,
        "succeeded": run.succeeded,
        "failed": run.failed,
        "timed_out": run.timed_out,
        "cancelled": run.cancelled,
        "skipped": run.skipped,
        "wall_seconds": run.wall_seconds,
        "scores": run_score_means(run),
    }


def human_summary(summary: dict[str, Any], run: Run) -> str:
    progress = selectors.run_progress(run=run)
    scores = ", ".join(
        f"{name} {value:.3f}" if value is not None else f"{name} n/a"
        for name, value in summary["scores"].items()
    )
    lines = [
        f"run {run.pk} {run.status}: {summary['succeeded']} succeeded, "
        f"{summary['failed']} failed, {summary['timed_out']} timed out, "
        f"{summary['cancelled']} cancelled, {summary['skipped']} skipped "
        f"of {summary['total']} in {summary['wall_seconds'] or 0:.2f} s"
        + (f" ({progress.throughput:.1f} items/s)" if progress.throughput else ""),
        f"scores: {scores or 'none'}",
    ]
    if run.error:
        lines.append(f"error: {run.error}")
    return "\n".join(lines)
