"""Execute shards of distributed runs (EVALSITE_EXECUTOR=procrastinate).

    python manage.py evalworker [--shards N] [--queues evalsite,...]

Start any number, on any machines that reach the database and Redis. SIGTERM
or Ctrl-C stops a worker gracefully (its shards finish, or are handed back
after EVALSITE_WORKER_GRACE_SECONDS); a second signal hands them back at once.
"""

from __future__ import annotations

import argparse
import logging
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from runs.pools import loops


class Command(BaseCommand):
    help = "Run a worker that executes shards of distributed runs."
    # Django's system checks import the URL configuration, the whole API's
    # schemas and scipy with it: seconds of CPU at every worker's start, for
    # pages a worker never serves (the server and `check` run them).
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--shards",
            type=int,
            default=None,
            help="shards this worker executes at once (default 1): the "
            "worker's own limit. A run's concurrency option is separate: it "
            "caps the run's calls in flight over all its shards and workers",
        )
        # The flag's old name, which read as the run option of the same name.
        parser.add_argument(
            "--concurrency", type=int, dest="old_shards", help=argparse.SUPPRESS
        )
        parser.add_argument(
            "--queues",
            default="",
            help="comma-separated procrastinate queues to take shards from "
            "(default: EVALSITE_QUEUE)",
        )

    def handle(
        self,
        *args: Any,
        shards: int | None,
        old_shards: int | None,
        queues: str,
        **opts: Any,
    ) -> None:
        if old_shards is not None:
            self.stderr.write(
                "evalworker: --concurrency is now --shards (shards at once; a "
                "run's concurrency option is its items at once)"
            )
            shards = old_shards if shards is None else shards
        shards = 1 if shards is None else shards
        if settings.EVALSITE_EXECUTOR != "procrastinate":
            raise CommandError(
                "evalworker executes distributed runs: set "
                "EVALSITE_EXECUTOR=procrastinate (with DATABASE_URL on PostgreSQL "
                "and REDIS_URL)",
                returncode=2,
            )
        if not 1 <= shards <= 64:
            raise CommandError(
                f"--shards must be between 1 and 64, not {shards}",
                returncode=2,
            )
        names = [q.strip() for q in queues.split(",") if q.strip()]
        database_ready()
        # Only now: it needs procrastinate's app, installed on PostgreSQL alone.
        # The schedules' periodic job registers itself on import.
        from runs.evaluations import periodic  # noqa: F401
        from runs.executor.distributed import run_worker

        if opts["verbosity"] >= 1:
            logging.basicConfig(
                level=logging.INFO if opts["verbosity"] >= 2 else logging.WARNING,
                format="%(asctime)s %(levelname)s %(name)s: %(message)s",
            )
            # One line a message: the project's own console handler would
            # print every "runs" message a second time, without its time.
            logging.getLogger("runs").handlers.clear()
        self.stderr.write(
            f"evalworker: {shards} shards at once, queues "
            f"{', '.join(names or [settings.EVALSITE_QUEUE])}"
        )
        self.stderr.flush()
        loops.run(run_worker(shards=shards, queues=names or [settings.EVALSITE_QUEUE]))
        self.stderr.write("evalworker: stopped")


def database_ready() -> None:
    """Refuse to start, saying why, on a database that does not answer or is
    not migrated (the worker would otherwise retry a bare "Database error")."""
    from django.db import DatabaseError, connection
    from django.db.migrations.executor import MigrationExecutor

    db = connection.settings_dict
    where = f"{db.get('HOST') or 'localhost'}:{db.get('PORT') or 5432}/{db['NAME']}"
    try:
        executor = MigrationExecutor(connection)
        plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    except DatabaseError as exc:
        raise CommandError(
            f"the database {where} does not answer: {str(exc).strip()}"
        ) from None
    finally:
        connection.close()
    if plan:
        raise CommandError(
            f"the database {where} is not migrated ({len(plan)} migrations to "
            "apply): run `python manage.py migrate` first"
        )
