"""Every key evalsite caches under, declared here.

A key is its kind's name, the generation and a digest of typed parts. The
generation moves on every deploy that changes what a cached value holds
(``CODE_GENERATION``, raised by hand) and on every one that brings a
migration (the newest migration of the app is part of it), so a cache shared
by processes of two versions never hands one a value of the other. What is
cached from a run's results is keyed by its ``results_version``, which every
writer of results moves (``versions.py``); while the run goes, by the second
instead of its counts (``results_version`` below).

Parts are str, int, float, bool, None, datetimes, and tuples of these: the
digest is of their pickle, which holds each of them whole, with its exact
type (``1``, ``1.0``, ``True`` and ``"1"`` differ), and takes a third of the
time of their ``repr`` (a page's rows hold many datetimes). Equal pickles
are equal parts; parts that share one object where equal parts hold two
(pickle writes the second as a reference) would make another key, a cache
miss, never a wrong hit. Any other value (an object that pickles what it
chooses, a list, a dict) is refused with TypeError rather than trusted.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import hashlib
import operator
import pickle
import re
import time
from collections.abc import Callable
from importlib import resources
from itertools import chain
from typing import TYPE_CHECKING, Any

from django.utils.crypto import salted_hmac

if TYPE_CHECKING:
    from runs.models import Run

# Raise when a cached value changes shape or meaning without a migration.
CODE_GENERATION = 6

_ALLOWED = frozenset({str, int, float, bool, type(None), dt.datetime, tuple})
# Fixed, so that every process digests the same parts alike.
_PICKLE_PROTOCOL = 5
_MIGRATION = re.compile(r"^(\d{4}_\w+)\.py$")


@functools.cache
def generation() -> str:
    """``CODE_GENERATION`` and the app's newest migration, read once."""
    names = (
        match.group(1)
        for entry in resources.files("runs.migrations").iterdir()
        if (match := _MIGRATION.match(entry.name))
    )
    return f"{CODE_GENERATION}.{max(names, default='0000')}"


# By dataclass: a getter of its fields' values, in order, as a tuple.
_FIELD_VALUES: dict[type, Callable[[Any], tuple[Any, ...]]] = {}


def _field_values(row: Any) -> Callable[[Any], tuple[Any, ...]]:
    names = tuple(f.name for f in dataclasses.fields(row))
    if len(names) == 1:
        # attrgetter of one name returns the value alone.
        (name,) = names
        return lambda value: (getattr(value, name),)
    return operator.attrgetter(*names) if names else lambda _value: ()


def record(row: Any) -> tuple[Any, ...]:
    """A dataclass instance as a key part: its fields' values, in order
    (each still checked as a part)."""
    kind = type(row)
    values = _FIELD_VALUES.get(kind)
    if values is None:
        values = _FIELD_VALUES[kind] = _field_values(row)
    return values(row)


def _check(parts: tuple[Any, ...]) -> None:
    # Depth by depth: the types of every value in the tuples at one depth as
    # one set, without a Python step per value (a page's rows are the tuples
    # of one depth, their values the next); then the tuples among them.
    containers: list[tuple[Any, ...]] = [parts]
    while containers:
        kinds = set(map(type, chain.from_iterable(containers)))
        if not kinds <= _ALLOWED:
            refused = sorted(kind.__name__ for kind in kinds - _ALLOWED)
            raise TypeError(
                "a cache key part must be str, int, float, bool, None, a datetime"
                f" or a tuple of these, not {', '.join(refused)}"
            )
        if tuple not in kinds:
            return
        containers = [m for c in containers for m in c if type(m) is tuple]


def key(kind: str, *parts: Any) -> str:
    """The key of ``kind`` for these parts (TypeError for a part of another
    type than the module's docstring lists). Parts that hold a going run's
    moment (``going_moment``) make a key of its lineage (``lineage``)."""
    _check(parts)
    pickled = pickle.dumps(parts, protocol=_PICKLE_PROTOCOL)
    digest = hashlib.blake2b(pickled, digest_size=20).hexdigest()
    mark = _going_mark()
    if mark.encode() not in pickled:
        return f"{kind}:{generation()}:{digest}"
    moments = _moment_pattern().findall(pickled)
    window = max(int(found) for found in moments)
    unmoved = hashlib.blake2b(
        _moment_pattern().sub(b"", pickled), digest_size=20
    ).hexdigest()
    return f"{kind}:{generation()}:{unmoved}{_GOING}{window}:{digest}"


# -- a run's figures, under its results_version ------------------------------------

# A run still going stores a batch up to four times a second (the executor's
# FLUSH_INTERVAL), each moving its results_version. Keyed by that version,
# every figure, cluster, comparison and page of it would be computed again
# after each batch by the next reader, and a busy run page would spend most
# of its time recomputing (bench/README.md, the mixed load). While a run
# goes, what is cached from its results is keyed by the second instead: at
# most one computation of each a second, never more than a second behind the
# results the run has stored, and every part of a key still moves with a
# retry (the revision) or a change of status. An ended run's key is its exact
# results_version, as stored figures and verdicts are.
GOING_REFRESH_SECONDS = 1


def going_second() -> int:
    """The current second as a going run's keys count it (a new one every
    ``GOING_REFRESH_SECONDS``)."""
    return int(time.time()) // GOING_REFRESH_SECONDS


# Each figure of a going run reads all its results so far: at 100,000
# results its summary takes about half a second, at a million several, which
# once a second would be more than a core for one run's page. A going run's
# figures are kept one second more for each GOING_RESULTS_A_SECOND results
# it has stored (at least GOING_REFRESH_SECONDS): recomputing them costs
# about the same share of a core whatever the run's size, and they are at
# most that far behind what it stored. Its counts, read from its row, stay
# live. By size, not by a measured time: every process and every reader
# agrees on the window, whatever else the machine is doing.
GOING_RESULTS_A_SECOND = 20_000


# A going run's value is keyed by the window it was computed in, and all its
# readers miss it at once when the next window starts: every figure and page
# of the run, each computed again while its readers wait, holding the
# server's threads (bench/README.md, the mixed load). Keys whose parts hold
# a going moment also name their lineage, the same parts at any moment, and
# the latest value of a lineage is kept beside them (single_flight.current):
# a reader that misses while another thread refreshes a going value takes
# the latest one of its lineage, at most LATEST_WINDOWS windows old, rather
# than wait for or compute the new one. Nothing else differs between the
# two: the run's revision, status, name, its reader, all make another lineage.
LATEST_WINDOWS = 10
_GOING = ":going-"


@functools.cache
def _going_mark() -> str:
    # Keyed by the site's secret: no text a user writes (a run's name, say)
    # can pass for a moment and join two lineages.
    secret = salted_hmac("evalsite.cache_keys.going", "moment", algorithm="sha256")
    return f"~going-{secret.hexdigest()[:16]}~"


@functools.cache
def _moment_pattern() -> re.Pattern[bytes]:
    return re.compile(re.escape(_going_mark().encode()) + rb"(\d+):\d+~")


def going_moment(window: int = GOING_REFRESH_SECONDS) -> str:
    """The window of ``window`` seconds that the current second is in, as a
    key part of a going run (marked for its lineage)."""
    return f"{_going_mark()}{window}:{going_second() // window}~"


def lineage(key: str) -> tuple[str, float] | None:
    """For the key of a value computed from a going run: the key its
    lineage's latest value is kept under, and for how long; else None."""
    head, found, tail = key.rpartition(_GOING)
    if not found:
        return None
    window = int(tail.partition(":")[0])
    return f"{head}:latest", float(LATEST_WINDOWS * window)


def going_window(run: Run) -> int:
    """How many seconds a going run's figures are kept."""
    return max(GOING_REFRESH_SECONDS, run.processed // GOING_RESULTS_A_SECOND)


def results_version(run: Run) -> str:
    """What keys the values cached from ``run``'s results: its
    ``results_version`` once it has ended; while it goes, its identity,
    revision, status and the window of ``going_window()`` seconds it is in."""
    if run.is_final:
        return run.results_version
    created = run.created_at.timestamp()
    moment = going_moment(going_window(run))
    return f"{run.pk}:{created}:{run.revision}:{run.status}:{moment}"


def run_summary(run: Run) -> str:
    return key("run-summary", results_version(run))


def run_scorers(run: Run) -> str:
    # Exact while the run goes too, while it is small: the live progress
    # block shows these beside the counts of the run's row, and each scorer's
    # "scored" adds up to what it says was processed. A large run keeps them
    # for its window (going_window), and the block says how many results
    # they are of; unless its figures are the sums of its tallies
    # (runs/records/tallies.py), read in milliseconds at any size.
    if run.is_final or going_window(run) == GOING_REFRESH_SECONDS or run.tallied:
        return key("run-scorers", run.results_version)
    return key("run-scorers", results_version(run))


def run_charts(run: Run) -> str:
    return key("run-charts", results_version(run))


def run_figures(run: Run, figures_format: int) -> str:
    return key("run-figures", figures_format, results_version(run))


def run_cluster_groups(family: str, run: Run) -> str:
    return key("run-cluster-groups", family, results_version(run))


def run_clusters(run: Run, baseline: Run | None, items_per_cluster: int) -> str:
    baseline_version = results_version(baseline) if baseline is not None else None
    version = results_version(run)
    return key("run-clusters", version, baseline_version, items_per_cluster)


def run_content_clusters(run: Run, version: str) -> str:
    # ``version`` holds the run's results version (content_clusters._version).
    return key("run-content-clusters", run.pk, version)


def comparison(runs: tuple[Run, ...]) -> str:
    return key("compare", tuple(results_version(run) for run in runs))


def leaderboard(runs: tuple[Run, ...], scorer: str | None) -> str:
    return key("leaderboard", tuple(results_version(run) for run in runs), scorer)


def comparison_items(
    baseline: Run, candidate: Run, scorer: str, change: str | None
) -> str:
    return key(
        "compare-items",
        results_version(baseline),
        results_version(candidate),
        scorer,
        change or "",
    )


# -- whole pages and API answers ----------------------------------------------------


def page(
    *, template: str, user_id: int | None, username: str, query: str, data: Any
) -> str:
    """A rendered page: its template, the user it was rendered for (the
    header shows the name), the query string (links repeat it) and its data."""
    return key("page", template, user_id, username, query, data)


def api_answer(*, name: str, user_id: int | None, data: Any) -> str:
    return key("json", name, user_id, data)
