"""Demo data for a fresh install: a user, a project, datasets, offline targets
and a finished run of the offline demo agent.

Safe to run on every start: it creates what is missing and never changes the
demo user's password, except to replace the one earlier versions published.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from runs.demo.seed import (
    DEMO_PROJECT,
    DEMO_USERNAME,
    DemoSeed,
    demo_agent_run_ensure,
    demo_seed,
)


def served_url(host: str, port: int) -> str:
    """The URL a browser opens for a server bound to ``host``:``port``."""
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return f"http://{host}:{port}/"
    if address.is_unspecified:  # bound to every interface: this machine answers
        address = ipaddress.ip_address("::1" if address.version == 6 else "127.0.0.1")
    text = f"[{address}]" if address.version == 6 else str(address)
    return f"http://{text}:{port}/"


class Command(BaseCommand):
    help = (
        "Create the demo user (an ordinary member of the demo project), the "
        "project, its datasets and targets, and run the demo agent on its "
        "tasks (offline); print the log-in once, when the password is made. "
        "Idempotent."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--host",
            default="127.0.0.1",
            help="address the server listens on, for the printed URL "
            "(default 127.0.0.1)",
        )
        parser.add_argument(
            "--port",
            type=int,
            default=8000,
            help="port the server listens on, for the printed URL (default 8000)",
        )
        parser.add_argument(
            "--quiet",
            action="store_true",
            help="print only the log-in line (the password is always printed "
            "when it is made)",
        )

    def handle(
        self,
        *args: Any,
        host: str = "127.0.0.1",
        port: int = 8000,
        quiet: bool = False,
        **opts: Any,
    ) -> None:
        seed = demo_seed()
        url = served_url(host, port)
        self.report(seed, quiet=quiet)
        agent_run = demo_agent_run_ensure(seed)
        if agent_run is not None and not quiet:
            self.stdout.write(
                f"demo agent run {agent_run.pk}: {agent_run.status}, "
                f"{agent_run.succeeded}/{agent_run.total} answered"
            )
        if seed.repaired:
            self.stdout.write(
                f"the {DEMO_USERNAME!r} user had the published password or admin "
                "rights: it is now an ordinary user with a new password (an "
                "operator account: .venv/bin/python manage.py createsuperuser)"
            )
        if seed.password is not None:
            self.stdout.write(
                f"log in at {url} as {DEMO_USERNAME} / {seed.password}  "
                "(shown only this once)"
            )
        else:
            self.stdout.write(
                f"log in at {url} as {DEMO_USERNAME} (password as printed when it "
                "was made; `.venv/bin/python manage.py changepassword "
                f"{DEMO_USERNAME}` sets another)"
            )

    def report(self, seed: DemoSeed, *, quiet: bool) -> None:
        if seed.project is None:
            self.stderr.write(
                f"a project named {DEMO_PROJECT!r} exists without the "
                f"{DEMO_USERNAME!r} user: demo data left out"
            )
            return
        if quiet:
            return
        names = ", ".join(
            f"{d.name} v{d.version} ({d.item_count})" for d in seed.datasets
        )
        self.stdout.write(f"demo project {seed.project.name!r}: {names}")
