"""What a sandboxed program is given and how it ended."""

from __future__ import annotations

import re
import signal
from dataclasses import dataclass, field, replace

from django.conf import settings

# The harness's status when the sandbox itself could not be set up.
HARNESS_REFUSED = 125
# How the harness prints an exception (harness.py, ``_print_exception``): a
# traceback whose frames are indented, then the exception's line; the tests'
# own code is "<tests>", the candidate's "<program>", and an exception the
# candidate raised inside a call carries this note.
TRACEBACK = "Traceback (most recent call last):"
RAISED_BY_CANDIDATE = "raised by the candidate:"
_EXCEPTION_LINE = re.compile(r"([A-Za-z_][\w.]*)(?::(.*))?")
# Only the end of a long output is searched for the last exception.
EXCEPTION_SEARCH = 16_000


@dataclass(frozen=True, slots=True)
class Limits:
    wall_seconds: float = 10.0
    cpu_seconds: int = 10
    memory_mb: int = 512
    processes: int = 32
    file_size_mb: int = 10
    open_files: int = 64
    output_kb: int = 64

    def within_ceilings(self) -> Limits:
        """These limits, none above the operator's ceiling (settings)."""
        held = {name: min(getattr(self, name), ceiling(name)) for name in CEILINGS}
        return replace(self, **held)


# Each limit, and the setting that holds the operator's ceiling on it.
CEILINGS = {
    "wall_seconds": "EVALSITE_SANDBOX_MAX_SECONDS",
    "cpu_seconds": "EVALSITE_SANDBOX_MAX_SECONDS",
    "memory_mb": "EVALSITE_SANDBOX_MAX_MEMORY_MB",
    "processes": "EVALSITE_SANDBOX_MAX_PROCESSES",
    "file_size_mb": "EVALSITE_SANDBOX_MAX_FILE_SIZE_MB",
    "open_files": "EVALSITE_SANDBOX_MAX_OPEN_FILES",
    "output_kb": "EVALSITE_SANDBOX_MAX_OUTPUT_KB",
}


def ceiling(limit: str) -> float:
    """The operator's ceiling on ``limit`` (a field of ``Limits``)."""
    value: float = getattr(settings, CEILINGS[limit])
    return value


@dataclass(frozen=True, slots=True)
class Program:
    """What runs: the candidate's module, and the tests that call into it.

    ``candidate`` is executed in a process of its own; ``tests`` (which must
    define ``check``) in the harness's, as ``check(<entry_point>)``.
    """

    candidate: str
    tests: str
    entry_point: str


@dataclass(slots=True)
class Outcome:
    """How one program ended. ``passed`` only for a clean run with the verdict."""

    mode: str  # "bubblewrap" or "limits"
    returncode: int | None = None
    timed_out: bool = False
    output_exceeded: bool = False
    verdict: bool = False
    output: bytes = b""
    limits: Limits = field(default_factory=Limits)

    @property
    def passed(self) -> bool:
        return (
            self.verdict
            and self.returncode == 0
            and not self.timed_out
            and not self.output_exceeded
        )

    def tail(self, chars: int = 600) -> str:
        text = self.output.decode("utf-8", "replace").rstrip()
        lines = _without_cut_traceback(
            [line for line in text.splitlines() if line.strip()]
        )
        tail = "\n".join(lines[-6:])
        return tail if len(tail) <= chars else "…" + tail[-chars:]

    def exception(self) -> tuple[str, str] | None:
        """The type of the exception that ended the program and where it was
        raised ("in the tests", "raised by the candidate", "while loading the
        completion"), or None when it printed no traceback."""
        text = self.output[-EXCEPTION_SEARCH:].decode("utf-8", "replace")
        start = len(text)
        # The last traceback that ends with its exception's line: one cut off
        # while it was printed (a forked child killed mid-traceback) is passed.
        while (start := text.rfind(TRACEBACK, 0, start)) >= 0:
            found = _exception_of(text[start:].splitlines()[1:])
            if found is not None:
                return found
        return None

    def status(self) -> int | None:
        """The exit status; a signal as its negative number."""
        code = self.returncode
        if code is not None and self.mode == "bubblewrap" and 128 < code <= 192:
            code = 128 - code  # bubblewrap reports a signal as 128 + its number
        return code

    def headline(self) -> str:
        """What kind of failure it was, in words that do not vary between two
        programs failing the same way (the first line of a score's reason)."""
        limits = self.limits
        if self.timed_out:
            return f"timed out after {limits.wall_seconds:g} s (wall time); killed"
        if self.output_exceeded:
            return f"printed more than {limits.output_kb} KB; stopped"
        code = self.status()
        if code is not None and code < 0:
            return _signal_reason(-code, limits)
        if self.passed:
            return "tests passed"
        if code == 0:
            return (
                "exited with status 0 before its tests finished (sys.exit or "
                "os._exit before check returned)"
            )
        if code == HARNESS_REFUSED:
            return "the sandbox could not be set up"
        found = self.exception()
        return " ".join(found) if found else f"exit status {code}"

    def describe(self) -> str:
        """Why the program did not pass (or that it did), for a score's reason:
        the headline, then what the program printed last."""
        headline = self.headline()
        if self.timed_out or self.output_exceeded or self.passed:
            return headline
        code = self.status()
        if code is not None and 0 < code != HARNESS_REFUSED and self.exception():
            return f"{headline}\nexit status {code}{self._with_tail()}"
        return headline + self._with_tail()

    def _with_tail(self) -> str:
        tail = self.tail()
        return f": {tail}" if tail else ""


def _exception_of(lines: list[str]) -> tuple[str, str] | None:
    """The exception a traceback's lines (after its first) end with, and where
    it was raised; None when they do not end with an exception's line."""
    frames = []
    for number, line in enumerate(lines):
        if line[:1].isspace() or not line:
            frames.append(line)
            continue
        found = _EXCEPTION_LINE.fullmatch(line.rstrip())
        if found is None:
            return None
        name = found.group(1).rpartition(".")[2]
        message = (found.group(2) or "").strip()
        if name == "CandidateError" and ":" in message:
            # An exception of the candidate's own class: its name first.
            name = message.partition(":")[0].strip() or name
        if RAISED_BY_CANDIDATE in lines[number:]:
            return name, "raised by the candidate"
        if any('"<tests>"' in frame for frame in frames):
            return name, "in the tests"
        return name, "while loading the completion"
    return None


def _without_cut_traceback(lines: list[str]) -> list[str]:
    """The lines up to the last one that is not part of a traceback cut off
    while it was printed: a forked child killed in the middle of its
    traceback leaves its header and frames after the error that ended the
    program. Output that does not end in such pieces is kept whole."""
    end = len(lines)
    while end and (lines[end - 1] == TRACEBACK or lines[end - 1][:1].isspace()):
        end -= 1
    cut = lines[end:]
    if end and any(
        line == TRACEBACK or line.lstrip().startswith('File "') for line in cut
    ):
        return lines[:end]
    return lines


def _signal_reason(number: int, limits: Limits) -> str:
    if number == signal.SIGXCPU:
        return f"CPU time limit of {limits.cpu_seconds} s exceeded (SIGXCPU)"
    if number == signal.SIGXFSZ:
        return f"file size limit of {limits.file_size_mb} MB exceeded (SIGXFSZ)"
    try:
        name = signal.Signals(number).name
    except ValueError:
        name = f"signal {number}"
    return f"killed by {name}"
