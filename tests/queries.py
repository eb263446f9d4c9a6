"""A count of queries read as it was when its block ended, or a failure.

Django's ``CaptureQueriesContext`` reads its queries lazily, as a slice of the
connection's log. The next request through a test client empties that log
(``request_started`` resets it), so a capture read after such a request reads
a slice of another log: most often nothing, and a bound on it holds whatever
the code did. The guard keeps what each capture held when its block ended and
fails a later read that finds anything else: read a capture before the next
request (into a local), never after it.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any
from weakref import WeakKeyDictionary

from django.test.utils import CaptureQueriesContext

django_exit = CaptureQueriesContext.__exit__
django_read = vars(CaptureQueriesContext)["captured_queries"].fget
# What each capture held when its block ended.
read_at_exit: WeakKeyDictionary[CaptureQueriesContext, list[dict[str, Any]]] = (
    WeakKeyDictionary()
)

MOVED = (
    "captured queries read after the connection's log moved under them (a later "
    "request empties it): read them before the next request"
)


def exit_keeping_what_it_read(
    capture: CaptureQueriesContext,
    exc_type: type[BaseException] | None,
    exc_value: BaseException | None,
    traceback: TracebackType | None,
) -> None:
    django_exit(capture, exc_type, exc_value, traceback)
    if capture.final_queries is not None:
        read_at_exit[capture] = django_read(capture)


def read_as_at_exit(capture: CaptureQueriesContext) -> list[dict[str, Any]]:
    read = django_read(capture)
    at_exit = read_at_exit.get(capture)
    if at_exit is not None and read != at_exit:
        raise AssertionError(MOVED)
    return read


def guard_captured_queries() -> None:
    """Make every ``CaptureQueriesContext`` fail a read of a log that moved."""
    CaptureQueriesContext.__exit__ = exit_keeping_what_it_read  # type: ignore[method-assign]
    CaptureQueriesContext.captured_queries = property(read_as_at_exit)  # type: ignore[assignment,method-assign]
