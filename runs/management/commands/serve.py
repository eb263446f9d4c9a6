"""Serve pages, the API and websockets with several Daphne processes on one
address, as gunicorn's or uvicorn's --workers do.

    python manage.py serve [--host H] [--port P] [--processes N] [-- DAPHNE_OPTION ...]

This process binds the address once and starts N ``daphne --fd`` processes
that all accept on that one socket: each connection goes to one of them.
SIGINT or SIGTERM is passed on to each, and the command ends when they have
stopped. If one ends on its own, the others are stopped and the command
fails, naming it; none is started again. ``-v 0`` turns Daphne's access log
off, as its own ``-v 0`` does; options after ``--`` go to every Daphne
(``--access-log FILE``, ``--proxy-headers``, ...).

More than one process needs the distributed mode: in the embedded mode runs
execute inside the server process, and their live progress and the sessions
are in its memory.
"""

from __future__ import annotations

import ctypes
import signal
import socket
import subprocess
import sys
import time
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

# Daphne's own listen backlog (Twisted's TCP default).
BACKLOG = 50
# prctl's option to be sent a signal when the parent process ends (linux/prctl.h).
PR_SET_PDEATHSIG = 1


class Command(BaseCommand):
    help = "Serve the site with N Daphne processes sharing one listening socket."
    # The Daphne processes load the pages; this one only waits for them.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument(
            "--processes",
            type=int,
            default=1,
            help="Daphne processes accepting on the address (default 1); more "
            "than one only in the distributed mode",
        )
        parser.add_argument(
            "daphne_args",
            nargs="*",
            metavar="-- DAPHNE_OPTION",
            help="options for every Daphne, after --, e.g. -- --access-log FILE",
        )

    def handle(
        self,
        *args: Any,
        host: str,
        port: int,
        processes: int,
        daphne_args: list[str],
        **opts: Any,
    ) -> None:
        if not 1 <= processes <= 64:
            raise CommandError(
                f"--processes must be between 1 and 64, not {processes}",
                returncode=2,
            )
        if processes > 1 and not (
            settings.EVALSITE_EXECUTOR == "procrastinate" and settings.REDIS_URL
        ):
            raise CommandError(
                f"--processes {processes} needs the distributed mode "
                "(EVALSITE_EXECUTOR=procrastinate with REDIS_URL): in the "
                "embedded mode runs execute inside the server process, and "
                "their live progress and the sessions are in its memory",
                returncode=2,
            )
        listener = bind(host, port)
        fd = listener.fileno()
        # -v is Daphne's own: 0 turns its access log off, 2 adds debug lines.
        argv = [sys.executable, "-m", "daphne", "--fd", str(fd)]
        argv += ["-v", str(opts["verbosity"]), *daphne_args]
        argv.append("evalsite.asgi:application")
        children: list[subprocess.Popen[bytes]] = []
        stopping = False

        def forward(signum: int, frame: object) -> None:
            nonlocal stopping
            if stopping:  # Daphne has nothing to do with a second signal
                return
            stopping = True
            for child in children:
                if child.poll() is None:
                    child.send_signal(signum)

        # An ignored SIGINT (a background job of a script) stays ignored, by
        # this process and so by the Daphnes, as by Daphne itself.
        if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
            signal.signal(signal.SIGINT, forward)
        signal.signal(signal.SIGTERM, forward)
        for _ in range(processes):
            if stopping:
                break
            # A group of its own: a Ctrl-C in the terminal reaches this
            # process alone, which passes one SIGINT on to each.
            children.append(
                subprocess.Popen(
                    argv,
                    cwd=settings.BASE_DIR,
                    pass_fds=(fd,),
                    process_group=0,
                    preexec_fn=end_with_parent,
                )
            )
        name, bound = listener.getsockname()[:2]
        self.stderr.write(
            f"serve: http://{name}:{bound}/ with {len(children)} Daphne processes "
            f"(pids {', '.join(str(c.pid) for c in children)})"
        )
        self.stderr.flush()
        failed: subprocess.Popen[bytes] | None = None
        while True:
            ended_now = [c for c in children if c.poll() is not None]
            if ended_now and not stopping:
                failed = ended_now[0]
                forward(signal.SIGTERM, None)
            if len(ended_now) == len(children):
                break
            time.sleep(0.2)
        listener.close()
        if failed is not None:
            raise CommandError(
                f"Daphne process {children.index(failed) + 1} (pid {failed.pid}) "
                f"{ended(failed.returncode)}; the others were stopped"
            )
        self.stderr.write("serve: stopped")


def end_with_parent() -> None:
    """In the child before it runs Daphne: a SIGTERM when ``serve`` ends,
    however it ends (killed with SIGKILL too), so that no Daphne outlives it
    holding the address (Linux's PR_SET_PDEATHSIG; elsewhere nothing)."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def bind(host: str, port: int) -> socket.socket:
    """The listening socket (SO_REUSEADDR, as Daphne's), IPv4 only: Daphne's
    --fd takes any socket for IPv4 and would garble IPv6 client addresses."""
    if ":" in host:
        raise CommandError(
            f"--host {host}: serve listens on IPv4 addresses only; for IPv6 "
            "put it behind a proxy, or run daphne -b itself",
            returncode=2,
        )
    try:
        return socket.create_server((host, port), backlog=BACKLOG)
    except OSError as exc:
        raise CommandError(f"cannot listen on {host}:{port}: {exc}") from None


def ended(returncode: int) -> str:
    if returncode < 0:
        return f"was killed by {signal.Signals(-returncode).name}"
    return f"exited with code {returncode}"
