"""Run an evaluation from the terminal, in this process, into the dashboard's database.

    python manage.py evalrun DATASET_FILE --target openai_chat --base-url URL \\
        --model NAME --scorer exact_match --scorer 'regex:{"pattern": "4\\d"}' [--json]
    python manage.py evalrun --format humaneval --target ... --scorer code_exec
    python manage.py evalrun --resume RUN_ID [--cost-budget USD] [--json]
    python manage.py evalrun --retry RUN_ID [--status failed] [--status timed_out]
    python manage.py evalrun --rescore RUN_ID --scorer 'strict=regex:{"pattern": "^4$"}'
    python manage.py evalrun DATASET_FILE ... --baseline RUN_ID [--fail-on worse]
        [--report FILE.md] [--junit FILE.xml]

The command makes the database ready first (migrating it when it lacks
migrations: on a fresh install it is the only command needed). It acts as a
user (``--user``; default: the only one, else the local operator account,
else the only superuser; on a fresh install the operator account is created)
in one of the user's projects (``--project``, created with the user as its
admin when the user has none of that name; see ``evalrun_setup``).
``--name`` names the run, ``--dataset-name`` the dataset. Target parameters,
scorer parameters and run options come from the plug-ins' and
``RunOptions``' declarations: a flag per parameter, ``--target-config JSON``
for a whole configuration, and
``--scorer KIND``, ``--scorer KIND:JSON`` or ``--scorer NAME=KIND:JSON``.

In the distributed mode (``EVALSITE_EXECUTOR=procrastinate``) the run is
deferred to workers and followed until it ends; ``--detach`` prints its id
and returns at once.

The first line on stderr is ``run <id> started``, after one line saying
what was set up or chosen when anything was. With ``--json`` one JSON
object goes to stdout. Exit codes: 0 when the run ends completed,
completed_with_errors or cancelled; 1 when it ends failed; 2 for bad
arguments or input. With ``--rescore`` the run's stored outputs are scored
again in this process (the target is not called): 0 when the pass completes,
1 when it fails, 2 for bad arguments or input.

With ``--baseline RUN_ID`` the run, once ended, is compared with that ended
run over the same dataset, as the comparison page compares them, and each
scorer's verdict is printed (``--json`` adds a ``gate`` object); the command
exits 3 when the gate fails (``--fail-on``: worse, the default, any-change or
never), unless the run failed (1). ``--report`` and ``--junit`` write the
comparison as Markdown and as JUnit XML. See ``runs.management.gate``.
"""

from __future__ import annotations

import asyncio
import gc
import json
import signal
import sys
import time
from argparse import SUPPRESS, ArgumentParser
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.core.management.base import CommandError
from django.db import transaction

from runs.errors import DomainError
from runs.executor.engine import Execution, execute_run
from runs.management.evalrun_cli import (
    BadInput,
    RunCommand,
    add_option_flags,
    add_target_flags,
    human_summary,
    json_object,
    report,
    run_options,
    scorer_spec,
    target_config,
)
from runs.management.evalrun_setup import (
    LOCAL_OPERATOR,
    Setup,
    acting_project,
    acting_user,
    database_prepare,
)
from runs.management.gate_flags import (
    EXIT_GATE_FAILED,
    add_gate_flags,
    gate_flags_check,
)
from runs.models import (
    FINAL_RUN_STATUSES,
    HEARTBEAT_STALE_SECONDS,
    Run,
    RunShard,
    RunStatus,
)
from runs.pools import loops
from runs.results.services import run_cancel, run_create, run_launch
from runs.scorers import REGISTRY as SCORERS
from runs.scorers import clean_scorer_specs
from runs.targets import REGISTRY as TARGETS

if TYPE_CHECKING:
    from runs.management.gate import Gate

# The gate itself (runs.management.gate, with the comparison behind it) is
# imported where a run is compared (--baseline), not by every start; so are
# the retry's and the resumption's services (--retry, --resume), which bring
# the results' selectors and the clusters with them.

CLAIM_POLL_SECONDS = 0.5
FOLLOW_POLL_SECONDS = 0.25


class RetryStatuses:
    """The choices of ``--status``, the retry's own, read from its services
    when a ``--status`` is given or the help is shown."""

    def __iter__(self) -> Iterator[str]:
        from runs.retry.services import RETRY_STATUSES

        return iter(RETRY_STATUSES)

    def __contains__(self, value: object) -> bool:
        return value in list(self)


class Command(RunCommand):
    help = "Import a dataset file, run it against a target and report, in this process."
    exit_codes = (
        "Exit codes: 0 completed/with errors/cancelled, 1 failed, 2 bad input, "
        "3 the --baseline gate failed."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "dataset_file",
            nargs="?",
            help="JSONL, CSV, JSON or YAML file; none with --format humaneval",
        )
        parser.add_argument(
            "--resume",
            type=int,
            metavar="RUN_ID",
            help="resume a run: its items without a result run (a new "
            "--cost-budget may be given)",
        )
        parser.add_argument(
            "--retry",
            type=int,
            metavar="RUN_ID",
            help="run the results of an ended run that have a --status again, in "
            "the same run (items without a result run too)",
        )
        parser.add_argument(
            "--status",
            action="append",
            default=[],
            choices=RetryStatuses(),
            metavar="STATUS",  # a metavar of the choices would read them now
            help="with --retry: %(choices)s (repeatable; default: failed and "
            "timed_out)",
        )
        parser.add_argument(
            "--rescore",
            type=int,
            metavar="RUN_ID",
            help="score the stored outputs of an ended run again with the --scorer "
            "given (added, or replacing the run's scorer of the same name), "
            "without calling its target",
        )
        parser.add_argument(
            "--format", help="file format (default: from the extension)"
        )
        parser.add_argument(
            "--name", dest="run_name", default="", help="the run's name"
        )
        parser.add_argument(
            "--dataset-name", help="the dataset's name (default: the file's stem)"
        )
        parser.add_argument("--id-field", default="id")
        parser.add_argument("--input-field", default="input")
        parser.add_argument("--expected-field", default="expected")
        parser.add_argument(
            "--user",
            metavar="USERNAME",
            help="act as this user (default: the only one, else the local "
            f"operator account {LOCAL_OPERATOR!r}, else the only superuser; on a "
            "fresh install the operator account is created)",
        )
        parser.add_argument(
            "--project",
            metavar="NAME",
            help="one of the user's projects, created when the user has none of "
            "that name (default: the user's only project, else 'Default')",
        )
        parser.add_argument(
            "--target",
            default="openai_chat",
            help=f"target kind: {', '.join(sorted(TARGETS))} (default: openai_chat)",
        )
        parser.add_argument(
            "--target-config",
            type=json_object,
            default={},
            metavar="JSON",
            help="the target's parameters as a JSON object; flags override its keys",
        )
        add_target_flags(parser.add_argument_group("target parameters"))
        parser.add_argument(
            "--scorer",
            action="append",
            type=scorer_spec,
            default=[],
            metavar="[NAME=]KIND[:JSON] | {JSON}",
            help=f"a scorer (repeatable): {', '.join(SCORERS.kinds())}, with its "
            "parameters as a JSON object after a colon; or the whole scorer as "
            'a JSON object, as the API takes it: {"kind": ..., "name": ..., '
            '"params": {...}, "when": {"scorer": NAME, "passed": false}}, '
            "where when runs it only on results whose earlier scorer NAME "
            "passed (true) or failed (false)",
        )
        add_option_flags(parser.add_argument_group("run options"))
        # The run's name was --run-name, while --name named the dataset.
        parser.add_argument("--run-name", dest="old_run_name", help=SUPPRESS)
        parser.add_argument("--json", action="store_true", help="print a JSON summary")
        parser.add_argument(
            "--detach",
            action="store_true",
            help="distributed mode (EVALSITE_EXECUTOR=procrastinate): print the "
            "run id once its shards are deferred, and return",
        )
        add_gate_flags(parser.add_argument_group("gate"), baseline_flag=True)

    def handle(self, *args: Any, **opts: Any) -> None:
        # What Django's set-up made lives as long as the process: the cyclic
        # collector need not walk it again, in the run nor at the exit (where
        # finalisation's collections over it took about 0.2 s of CPU).
        gc.freeze()
        if opts["old_run_name"] is not None:
            self.stderr.write("--run-name is now --name (the run's name)")
            opts["run_name"] = opts["run_name"] or opts["old_run_name"]
        gate_flags_check(opts)
        if opts["baseline"] is not None and opts["detach"]:
            raise BadInput(
                "--baseline compares the run when it ends: not with --detach"
            )
        self.baseline: Run | None = None
        setup = Setup()
        database_prepare(setup)
        if existing := opts["rescore"] or opts["retry"] or opts["resume"]:
            self.say(setup)
            runs = Run.objects.select_related("project", "dataset").filter(pk=existing)
            if opts["baseline"] is not None and (found := runs.first()) is not None:
                self.gate_check(opts, found)  # before the run is changed
        if opts["rescore"]:
            self.rescore(opts)
            return
        try:
            if opts["retry"]:
                run = self.retried(opts)
            elif opts["resume"]:
                run = self.resumable(opts["resume"], opts)
            else:
                run = self.create(opts, setup)
        except DomainError as exc:
            raise BadInput(str(exc)) from None
        distributed = settings.EVALSITE_EXECUTOR == "procrastinate"
        if opts["detach"] and not distributed:
            raise BadInput(
                "--detach needs the distributed mode (EVALSITE_EXECUTOR=procrastinate)"
            )
        quiet = not sys.stderr.isatty()
        if run.is_final:  # a retry that found nothing to run
            status: str | None = run.status
        elif distributed:
            run_launch(run=run)
            if opts["detach"]:
                self.stdout.write(str(run.pk))
                return
            self.stderr.write(f"run {run.pk} started (deferred to workers)")
            self.stderr.flush()
            status = loops.run(follow(run, quiet=quiet, say=self.stderr.write))
        else:
            self.stderr.write(f"run {run.pk} started")
            self.stderr.flush()
            status = loops.run(self.run_to_end(run, quiet=quiet))
        run.refresh_from_db()
        if status is None:
            raise CommandError(
                f"run {run.pk} is held by a live executor ({run.executor_id})"
            )
        self.finish(opts, run, failed=run.status == RunStatus.FAILED)

    def finish(
        self,
        opts: dict[str, Any],
        run: Run,
        *,
        failed: bool,
        lines: Sequence[str] = (),
        json_error: bool = True,
    ) -> None:
        """The summary, the gate's verdicts and ``lines``, then the exit code."""
        summary = report(run)
        gate = self.gate(opts, run)
        if opts["json"]:
            if gate is not None:
                summary["gate"] = gate.as_json()
            self.stdout.write(json.dumps(summary))
            if run.error and json_error:  # the JSON keeps its keys; why it
                self.stderr.write(f"error: {run.error}")  # failed goes here
        else:
            self.stderr.write(human_summary(summary, run))
            if gate is not None:
                from runs.management.gate import gate_lines

                lines = [*lines, *gate_lines(gate)]
            for line in lines:
                self.stderr.write(line)
        if failed:
            sys.exit(1)
        if gate is not None and gate.failed:
            sys.exit(EXIT_GATE_FAILED)

    # -- the gate ----------------------------------------------------------------

    def gate_check(self, opts: dict[str, Any], run: Run) -> None:
        """The baseline is one the user may see, ended, comparable with ``run``
        (which may be unsaved): before anything runs."""
        from runs.management.gate import gate_admit, gate_run

        user = acting_user(opts["user"])
        self.baseline = gate_run(user=user, run_id=opts["baseline"], role="baseline")
        gate_admit(baseline=self.baseline, candidate=run)

    def gate(self, opts: dict[str, Any], run: Run) -> Gate | None:
        if self.baseline is None:
            return None
        from runs.management.gate import gate_evaluate
        from runs.management.gate_reports import gate_files_write

        gate = gate_evaluate(
            user=acting_user(opts["user"]),
            baseline=self.baseline,
            candidate=run,
            fail_on=opts["fail_on"],
            require_calibrated=opts["require_calibrated"],
        )
        gate_files_write(gate, report=opts["report"], junit=opts["junit"])
        return gate

    # -- re-scoring --------------------------------------------------------------

    def rescore(self, opts: dict[str, Any]) -> None:
        from runs.executor.rescore import execute_scoring_pass
        from runs.rescore.services import run_rescore

        run = Run.objects.select_related("project").filter(pk=opts["rescore"]).first()
        if run is None:
            raise BadInput(f"no run {opts['rescore']}")
        if not opts["scorer"]:
            raise BadInput("give at least one --scorer to re-score with")
        user = acting_user(opts["user"]) if opts["user"] else None
        try:
            plan = run_rescore(run=run, user=user, scorers=opts["scorer"], launch=False)
        except DomainError as exc:
            raise BadInput(str(exc)) from None
        assert plan.scoring_pass is not None
        names = ", ".join(spec["name"] for spec in plan.scorers)
        self.stderr.write(
            f"run {run.pk}: re-scoring {plan.results} results with {names} "
            f"(pass {plan.scoring_pass.pk})"
        )
        self.stderr.flush()
        status = loops.run(execute_scoring_pass(plan.scoring_pass.pk))
        plan.scoring_pass.refresh_from_db()
        run.refresh_from_db()
        scoring = plan.scoring_pass
        line = (
            f"pass {scoring.pk} {scoring.status}: {scoring.scored} of "
            f"{scoring.total} results scored, {scoring.errored} scorer errors"
            + (f"; {scoring.error}" if scoring.error else "")
        )
        self.finish(
            opts, run, failed=status != "completed", lines=[line], json_error=False
        )

    # -- setting up ------------------------------------------------------------

    def resumable(self, run_id: int, opts: dict[str, Any]) -> Run:
        run = Run.objects.select_related("project").filter(pk=run_id).first()
        if run is None:
            raise BadInput(f"no run {run_id}")
        options = run_options(opts)
        if not run.is_final and not options:
            return run
        # An ended run resumes its items without a result (a cost budget
        # reached leaves them); a new budget may come with it.
        from runs.retry.resume import run_resume

        user = acting_user(opts["user"]) if opts["user"] else None
        return run_resume(run=run, user=user, options=options, launch=False)

    def retried(self, opts: dict[str, Any]) -> Run:
        from runs.retry.services import run_retry

        run = Run.objects.select_related("project").filter(pk=opts["retry"]).first()
        if run is None:
            raise BadInput(f"no run {opts['retry']}")
        user = acting_user(opts["user"]) if opts["user"] else None
        plan = run_retry(
            run=run,
            user=user,
            statuses=opts["status"] or None,
            launch=False,
        )
        if not plan.started:
            self.stderr.write(f"run {run.pk}: nothing to retry")
        else:
            self.stderr.write(
                f"run {run.pk}: retrying {plan.items} items ({plan.results} "
                f"results, up to {plan.calls} calls)"
            )
        return plan.run

    def say(self, setup: Setup) -> None:
        """One line on what was set up or chosen, when anything was."""
        if line := setup.line():
            self.stderr.write(line)
            self.stderr.flush()

    def create(self, opts: dict[str, Any], setup: Setup) -> Run:
        from runs.datasets.importers import Source, dataset_import

        file = opts["dataset_file"]
        packaged = not file and opts["format"] == "humaneval"
        if not file and not packaged:
            raise BadInput("give a DATASET_FILE or --resume RUN_ID")
        path = Path(file or "humaneval")
        if not packaged and not path.is_file():
            raise BadInput(f"{file}: no such file")
        if not opts["scorer"]:
            raise BadInput("give at least one --scorer")
        user = acting_user(opts["user"], setup)
        config = target_config(opts)
        project = acting_project(user, opts["project"], setup)
        self.say(setup)
        # The scorers are checked (again by run_create) before the dataset is
        # imported: a mistake in one writes nothing.
        scorers = clean_scorer_specs(opts["scorer"])
        if opts["baseline"] is not None:
            from runs.management.gate import gate_run

            # The baseline is checked before the dataset is imported...
            self.baseline = gate_run(
                user=user, run_id=opts["baseline"], role="baseline"
            )
        # An import is all or nothing by itself, in short transactions: inside
        # one around it, it would hold SQLite's write lock for its whole length.
        dataset = dataset_import(
            project=project,
            user=user,
            name=opts["dataset_name"] or path.stem,
            # --format humaneval without a file: the packaged HumanEval set.
            source=None if packaged else Source.from_path(path),
            format=opts["format"],
            filename="" if packaged else path.name,
            id_field=opts["id_field"],
            input_field=opts["input_field"],
            expected_field=opts["expected_field"],
            reuse_identical=True,
        )
        if self.baseline is not None:  # ...and the pairing before a run is made
            from runs.management.gate import gate_admit

            gate_admit(
                baseline=self.baseline,
                candidate=Run(project=project, dataset=dataset, scorers=scorers),
            )
        with transaction.atomic():
            return run_create(
                user=user,
                dataset=dataset,
                target_kind=opts["target"],
                target_config=config,
                scorers=opts["scorer"],
                options=run_options(opts),
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


async def show_progress(run_id: int) -> None:
    from rich.console import Console
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
    with Progress(*columns, console=Console(stderr=True), transient=False) as bar:
        task = bar.add_task("run", total=None, detail="")
        while True:
            run = await asyncio.to_thread(Run.objects.get, pk=run_id)
            detail = f"failed {run.failed} · timed out {run.timed_out}"
            bar.update(task, total=run.total, completed=run.processed, detail=detail)
            await asyncio.sleep(0.25)


async def follow(run: Run, *, quiet: bool, say: Callable[[str], Any]) -> str:
    """Wait for a run that workers execute to end, with the progress bar.

    Ctrl-C cancels the run, as in this process: its workers stop it. When no
    worker has taken any of its shards for a while, ``say`` tells so, once.
    """
    loop = asyncio.get_running_loop()

    def cancel() -> None:
        loop.run_in_executor(None, lambda: run_cancel(run=run))

    loop.add_signal_handler(signal.SIGINT, cancel)
    loop.add_signal_handler(signal.SIGTERM, cancel)
    progress = None if quiet else asyncio.create_task(show_progress(run.pk))
    waited: float | None = loop.time()
    try:
        while True:
            status = await asyncio.to_thread(
                lambda: Run.objects.values_list("status", flat=True).get(pk=run.pk)
            )
            if status in FINAL_RUN_STATUSES:
                return status
            # As long as a silent worker is given before it counts as stalled.
            patience = settings.EVALSITE_STALL_SECONDS
            if waited is not None and loop.time() - waited >= patience:
                waited = None
                if not await asyncio.to_thread(run_shards_claimed, run.pk):
                    say(
                        f"no worker has taken a shard of run {run.pk} yet: is "
                        "`python manage.py evalworker` running, on queue "
                        f"{settings.EVALSITE_QUEUE!r}, against this database?"
                    )
            await asyncio.sleep(FOLLOW_POLL_SECONDS)
    finally:
        if progress is not None:
            progress.cancel()


def run_shards_claimed(run_id: int) -> bool:
    """Some worker has claimed a shard of the run (now or before)."""
    return RunShard.objects.filter(run_id=run_id, claims__gt=0).exists()
