"""evalrun's flags, derived from the declarations, and its summaries of a run."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
from argparse import ArgumentError, ArgumentTypeError
from typing import Any, NoReturn

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connections

from runs.analysis.progress import run_progress
from runs.analysis.summary import (
    RunSummary,
    run_pass_rates,
    run_score_means,
    run_summary_cached,
)
from runs.calls.pricing import usd
from runs.executor.options import option_params
from runs.models import Run
from runs.plugins import Param, describe
from runs.targets import REGISTRY as TARGETS

EXIT_BAD_INPUT = 2
TARGET_DEST = "target__"
OPTION_DEST = "option__"
MONITORING_TOOLS = 6  # sys.monitoring's tool ids: 0 to 5


class BadInput(CommandError):
    def __init__(self, message: str) -> None:
        super().__init__(message, returncode=EXIT_BAD_INPUT)


class RunCommand(BaseCommand):
    """A command of runs and their gate (evalrun, evalcompare): its exit codes
    are said under its help (``exit_codes``)."""

    # Django's system checks import the URL configuration, and with it the
    # whole API's schemas: about 0.4 s of every evaluation's start-up, to
    # check pages these commands never serve (the server and `check` run them).
    requires_system_checks: list[str] = []
    exit_codes = ""

    def create_parser(
        self, prog_name: str, subcommand: str, **kwargs: Any
    ) -> CommandParser:
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        parser.epilog = self.exit_codes
        return parser

    def run_from_argv(self, argv: list[str]) -> NoReturn:
        """Run from the command line, then end the process at once.

        What the command stored is committed and what it printed is written
        by then: the interpreter's teardown (finalising a thousand modules)
        would only add CPU time to every invocation. An uncaught exception
        still ends the process the usual way, with its traceback.
        """
        try:
            super().run_from_argv(argv)
        except SystemExit as exc:
            process_end(exit_code(exc))
        process_end(0)


def exit_code(exc: SystemExit) -> int:
    """The status the interpreter would exit with for ``exc``."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    print(exc.code, file=sys.stderr)  # as the interpreter prints it
    return 1


def observed() -> bool:
    """A tracer, a profiler or a monitoring tool (a debugger, coverage,
    cProfile) watches the process: it writes what it gathered at the exit."""
    tools = (sys.monitoring.get_tool(tool) for tool in range(MONITORING_TOOLS))
    return (
        sys.gettrace() is not None
        or sys.getprofile() is not None
        or any(tool is not None for tool in tools)
    )


def process_end(code: int) -> NoReturn:
    """Flush the output and the logs, close the database connections and end
    the process with ``code``, skipping the interpreter's teardown (unless
    something that writes at the exit watches the process)."""
    if observed():
        sys.exit(code)
    logging.shutdown()
    connections.close_all()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # closed by the reader
            stream.flush()
    os._exit(code)


# -- flags derived from the declarations ------------------------------------------


def json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ArgumentTypeError(f"not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ArgumentTypeError("must be a JSON object")
    return value


def scorer_spec(text: str) -> dict[str, Any]:
    """``KIND``, ``KIND:{"param": ...}``, ``NAME=KIND:{...}``, or the whole
    spec as a JSON object (``{"kind": ..., "name": ..., "params": {...},
    "when": {...}}``).

    Only the text is read here; the specs are checked together when the run
    is created, as the API checks them, with errors naming the field
    (``scorers[1].when.scorer``).
    """
    if text.lstrip().startswith("{"):
        return json_object(text)
    head, colon, params = text.partition(":")
    name, _, kind = head.rpartition("=")
    spec: dict[str, Any] = {"kind": kind.strip()}
    if name:
        spec["name"] = name.strip()
    if colon:
        spec["params"] = json_object(params)
    return spec


def flag_name(param: Param) -> str:
    return param.extra.get("flag") or "--" + param.name.replace("_", "-")


def add_param_flag(
    group: Any, param: Param, *, dest: str, flag: str, help: str
) -> None:
    """One flag for one declared parameter; None when not given."""
    kwargs: dict[str, Any] = {"dest": dest, "default": None, "help": help}
    if param.type == "boolean":
        if param.default is True:
            flag = "--no-" + flag.removeprefix("--")
        kwargs.update(action="store_const", const=param.default is not True)
    else:
        types = {"integer": int, "number": float, "json": json.loads}
        kwargs.update(type=types.get(param.type, str), metavar=param.type.upper())
        if param.choices:
            kwargs.update(choices=param.choices, metavar=None)
    # A name the command already uses gets no flag; --target-config sets it.
    with contextlib.suppress(ArgumentError):
        group.add_argument(flag, **kwargs)


def flag_help(param: Param, *, kinds: list[str] | None = None) -> str:
    parts = [param.help, f"({param.bounds})" if param.bounds else ""]
    if param.type == "boolean" and param.default is True:
        parts.append("(on unless this flag is given)")
    if kinds:
        parts.append(f"[{', '.join(kinds)}]")
    return " ".join(part for part in parts if part).replace("%", "%%")


def add_target_flags(group: Any) -> None:
    """A flag per target parameter; kinds that share a name share the flag."""
    kinds_of: dict[str, list[str]] = {}
    first: dict[str, Param] = {}
    for kind, cls in sorted(TARGETS.items()):
        for param in describe(cls.Params):
            kinds_of.setdefault(param.name, []).append(kind)
            first.setdefault(param.name, param)
    for name, param in first.items():
        add_param_flag(
            group,
            param,
            dest=TARGET_DEST + name,
            flag=flag_name(param),
            help=flag_help(param, kinds=kinds_of[name]),
        )


def add_option_flags(group: Any) -> None:
    for param in option_params():
        add_param_flag(
            group,
            param,
            dest=OPTION_DEST + param.name,
            flag=flag_name(param),
            help=flag_help(param),
        )


def target_config(opts: dict[str, Any]) -> dict[str, Any]:
    """--target-config, with the target flags that were given on top."""
    kind = opts["target"]
    declared = describe(TARGETS[kind].Params) if kind in TARGETS else None
    known = {p.name for p in declared} if declared is not None else None
    config = dict(opts["target_config"])
    for key, value in opts.items():
        if not key.startswith(TARGET_DEST) or value is None:
            continue
        name = key.removeprefix(TARGET_DEST)
        if known is not None and name not in known:
            flag = "--" + name.replace("_", "-")
            raise BadInput(f"{flag} is not a parameter of target {kind}")
        config[name] = value
    return config


def run_options(opts: dict[str, Any]) -> dict[str, Any]:
    return {
        key.removeprefix(OPTION_DEST): value
        for key, value in opts.items()
        if key.startswith(OPTION_DEST) and value is not None
    }


# -- summaries -------------------------------------------------------------------


def report(run: Run) -> dict[str, Any]:
    """The ``--json`` summary: exactly these keys.

    ``pass_rate`` is each scorer's headline figure, as the API and the run's
    page give it; ``score_means`` the mean of its score values. ``scores``
    is ``score_means`` under its first name, kept for the clients that read
    it (to be removed in the next release).
    """
    means = run_score_means(run)
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
        "pass_rate": run_pass_rates(run),
        "score_means": means,
        "scores": means,
    }


def human_summary(summary: dict[str, Any], run: Run) -> str:
    progress = run_progress(run=run)
    figures = run_summary_cached(run=run)
    rates = ", ".join(
        f"{s.scorer} {s.pass_rate:.1%} ({s.passed}/{s.judged} passed)"
        if s.pass_rate is not None
        else f"{s.scorer} n/a"
        for s in figures.scorers
    )
    means = ", ".join(
        f"{name} {value:.3f}" if value is not None else f"{name} n/a"
        for name, value in summary["score_means"].items()
    )
    lines = [
        # "answered": the calls' status; the pass rate below says how many
        # of the answers were right.
        f"run {run.pk} {run.status}: {summary['succeeded']} answered, "
        f"{summary['failed']} failed, {summary['timed_out']} timed out, "
        f"{summary['cancelled']} cancelled, {summary['skipped']} skipped "
        f"of {summary['total']} in {summary['wall_seconds'] or 0:.2f} s"
        + (f" ({progress.throughput:.1f} items/s)" if progress.throughput else ""),
        f"pass rate: {rates or 'none'}",
        f"mean score: {means or 'none'}",
        timing_line(figures),
        f"tokens: {run.prompt_tokens} prompt + {run.completion_tokens} completion"
        + cost_note(run),
    ]
    if run.error:
        lines.append(f"error: {run.error}")
    return "\n".join(lines)


def timing_line(figures: RunSummary) -> str:
    """Time to result (every attempt and back-off) beside the last attempt's
    latency, and the attempts that failed: a retried timeout shows."""
    if figures.time_to_result_count:
        ttr, last = figures.time_to_result_ms, figures.latency_ms
        line = (
            f"time to result: p50 {_seconds(ttr['p50'])}, p90 {_seconds(ttr['p90'])}"
            f" (last attempt p50 {_seconds(last['p50'])})"
        )
    else:
        line = "time to result: none answered"
    kinds = ", ".join(f"{n} {kind}" for kind, n in figures.attempt_error_kinds.items())
    failed = figures.failed_attempts
    return f"{line}; failed attempts: {failed}" + (f" ({kinds})" if kinds else "")


def _seconds(ms: float | None) -> str:
    return "n/a" if ms is None else f"{ms / 1000:.2f} s"


def cost_note(run: Run) -> str:
    if run.unpriced:
        return f", cost {usd(run.cost)} + {run.unpriced} results with no price"
    return f", cost {usd(run.cost)}" if run.cost else ""
