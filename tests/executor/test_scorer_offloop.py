"""Scorers compute off the event loop: a hostile pattern or a huge output leaves
the loop that serves pages and runs answering, and the scorer timeout fires."""

from __future__ import annotations

import asyncio
import signal
import threading
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from runs.executor.engine import execute_run
from runs.executor.items import ItemRunner
from runs.executor.options import RunOptions
from runs.models import RunStatus, Score
from runs.plugins.scoring import scorer_pool, thread_shares
from runs.pools.shares import scoring_for
from runs.scorers import base, build_scorer, clean_scorer_specs
from runs.scorers.base import INLINE_CHARS
from runs.scorers.exact_match import ExactMatch
from runs.scorers.includes import Includes
from runs.scorers.numeric import Numeric
from runs.scorers.regex import Regex
from runs.targets import TargetInput
from tests.executor.conftest import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

# The longest the loop may go without a tick before the test fails. Far above
# anything a working executor comes near (its ticks are microseconds apart);
# the backtracking match this guards against takes longer than the universe.
BUDGET_SECONDS = 20.0
HUGE = 10 * 1024 * 1024


class LoopBlocked(BaseException):
    """The alarm's verdict: a BaseException, so no scorer can record it as a score."""


class LoopWatch:
    """Counts the event loop's ticks and fails the test if they ever stop.

    A ticker coroutine re-arms an alarm at every tick; the alarm only goes off
    when the loop has not run the ticker for the whole budget. It is delivered
    even inside a C regular-expression match, so a frozen loop fails the test
    instead of hanging it. ``interval`` 0 ticks on every loop iteration.
    """

    def __init__(self, *, interval: float = 0.0) -> None:
        self.interval = interval
        self.ticks = 0
        self.blocked = False
        self.thread = threading.get_ident()

    def expire(self, signum: int, frame: object) -> None:
        self.blocked = True
        raise LoopBlocked(f"the event loop did not tick for {BUDGET_SECONDS:g} s")

    async def tick(self) -> None:
        while True:
            self.ticks += 1
            signal.setitimer(signal.ITIMER_REAL, BUDGET_SECONDS)
            await asyncio.sleep(self.interval)

    async def __aenter__(self) -> LoopWatch:
        self.previous = signal.signal(signal.SIGALRM, self.expire)
        self.ticker = asyncio.create_task(self.tick())
        for _ in range(2):  # the ticker has run: it is on every iteration now
            await asyncio.sleep(0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.ticker.cancel()
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, self.previous)


def runner(*kinds_params: tuple[str, dict[str, Any]], **options: Any) -> ItemRunner:
    specs = clean_scorer_specs(
        [{"kind": kind, "params": params} for kind, params in kinds_params]
    )
    return ItemRunner(
        target=None,  # type: ignore[arg-type]  # only scoring is exercised
        scorers=[build_scorer(spec) for spec in specs],
        options=RunOptions(**options),
    )


def item(expected: Any) -> TargetInput:
    return TargetInput(index=0, external_id="x", input="q", expected=expected)


async def test_a_hostile_regex_in_a_run_gets_a_verdict_and_the_loop_keeps_ticking(
    make_run,
):
    # The reported freeze: (a+)+$ against "a" * 26 + "!" held the server 10.6 s.
    # With 40 a's a backtracking engine would need days; the fake model echoes
    # the prompt, so this is the output the scorer sees.
    items = [{"id": "hostile", "input": "a" * 40 + "!", "expected": "x"}]
    scorer = {"kind": "regex", "params": {"pattern": "(a+)+$"}}
    run = await sync_to_async(make_run)(
        items, scorers=[scorer, "exact_match"], scorer_timeout_seconds=5
    )
    async with LoopWatch(interval=0.005) as watch:
        status = await execute_run(run.pk)
        ticks = watch.ticks
    scores = {s.scorer: s async for s in Score.objects.filter(result__run=run)}
    assert (status, watch.blocked) == (RunStatus.COMPLETED, False)
    regex = scores["regex"]
    assert (regex.value, regex.passed, regex.error) == (0.0, False, "")
    assert regex.reason == "no match for /(a+)+$/"
    assert scores["exact_match"].value == 0.0
    assert ticks > 2


def record_threads(monkeypatch) -> dict[str, set[int]]:
    """The threads each built-in scorer computes in, filled as they score."""
    threads: dict[str, set[int]] = {}
    for cls in (ExactMatch, Includes, Numeric, Regex):
        original = cls.score

        def recording(self, *, output, item, _original=original):
            threads.setdefault(self.kind, set()).add(threading.get_ident())
            return _original(self, output=output, item=item)

        monkeypatch.setattr(cls, "score", recording)
    return threads


async def test_builtin_scorers_compute_outside_the_loop_thread_but_short_texts(
    make_run, monkeypatch
):
    threads = record_threads(monkeypatch)
    scorers = ["exact_match", "includes", "numeric"]
    scorers.append({"kind": "regex", "params": {"pattern": r"\d"}})
    run = await sync_to_async(make_run)(
        [{"input": "What is 2 + 3?", "expected": "5"}], scorers=scorers
    )
    loop_thread = threading.get_ident()
    assert await execute_run(run.pk) == RunStatus.COMPLETED
    assert sorted(threads) == ["exact_match", "includes", "numeric", "regex"]
    # A user's pattern and a number parse always go to the pool; a comparison
    # of two short texts costs less on the loop than the hop (inline_chars).
    assert {kind for kind, seen in threads.items() if loop_thread in seen} == {
        "exact_match",
        "includes",
    }
    assert threads["exact_match"] == threads["includes"] == {loop_thread}
    passed = [s.passed async for s in Score.objects.filter(result__run=run)]
    assert passed == [True] * 4


@pytest.mark.parametrize("kind", ["exact_match", "includes"])
@pytest.mark.parametrize(
    ("output", "expected"),
    [
        ("x" * INLINE_CHARS, "y"),  # together just over the limit
        ("y", ["x" * INLINE_CHARS]),  # the expected answers count too
        ({"answer": "y"}, "y"),  # nested: its size is not known cheaply
    ],
    ids=["long-output", "long-expected", "nested-output"],
)
async def test_beyond_short_texts_an_inline_scorer_computes_in_a_worker(
    kind, output, expected, monkeypatch
):
    threads = record_threads(monkeypatch)
    scoring = runner((kind, {}))
    [record] = await scoring.score(output, item(expected))
    assert record.error == ""
    assert threads[kind] and threading.get_ident() not in threads[kind]


async def test_at_the_inline_limit_the_scorer_computes_on_the_loop(monkeypatch):
    threads = record_threads(monkeypatch)
    scoring = runner(("exact_match", {}))
    output = "x" * (INLINE_CHARS - 1)
    [record] = await scoring.score(output, item("x"))
    assert (record.passed, threads["exact_match"]) == (False, {threading.get_ident()})


class StuckScorer(base.ScorerPlugin):
    """CPU work that does not return: a stand-in for a runaway computation."""

    kind = "stuck_for_test"
    label = "Stuck"
    release = threading.Event()
    inside = 0  # calls started (for a test that waits until all have)

    def __init__(self, name: str, params: dict[str, Any]) -> None:
        self.name = name

    def score(self, *, output: Any, item: TargetInput) -> base.ScoreOutcome:
        type(self).inside += 1  # one thread at a time under the GIL: enough here
        self.release.wait(BUDGET_SECONDS)
        return base.ScoreOutcome(1.0, True, "released")


async def test_a_scorer_stuck_in_cpu_work_times_out_and_the_others_score(
    make_run, monkeypatch
):
    monkeypatch.setitem(base.REGISTRY, StuckScorer.kind, StuckScorer)
    StuckScorer.release.clear()
    run = await sync_to_async(make_run)(
        [{"input": "What is 2 + 3?", "expected": "5"}],
        scorers=[StuckScorer.kind, "exact_match"],
        scorer_timeout_seconds=0.2,
    )
    try:
        async with LoopWatch(interval=0.005) as watch:
            status = await execute_run(run.pk)
    finally:
        StuckScorer.release.set()  # give the worker thread back
    scores = {s.scorer: s async for s in Score.objects.filter(result__run=run)}
    assert (status, watch.blocked) == (RunStatus.COMPLETED, False)
    assert scores[StuckScorer.kind].error == "scorer exceeded 0.2 s"
    assert scores["exact_match"].value == 1.0


def huge_text(last_words: str) -> str:
    """About 10 MB of short words, numbers and punctuation, then ``last_words``."""
    filler = "the 7 answers, maybe 13; or... "
    return filler * (HUGE // len(filler)) + last_words


@pytest.mark.parametrize(
    ("kind", "params", "output", "expected", "passed"),
    [
        (
            "exact_match",
            {"collapse_whitespace": True, "ignore_punctuation": True},
            huge_text("  so:   42!"),
            huge_text("so 42").replace(",", "").replace(";", "").replace("...", ""),
            True,
        ),
        ("includes", {}, huge_text("final: 421"), "42", False),
        ("numeric", {}, huge_text("final: 1,234.5"), "1234.5", True),
        (
            "regex",
            {"pattern": r"(\w+\s?)+$"},
            huge_text("word" * 1000 + "!"),
            None,
            False,
        ),
    ],
)
async def test_a_10mb_output_is_scored_while_the_loop_ticks(
    kind, params, output, expected, passed
):
    scoring = runner((kind, params), scorer_timeout_seconds=BUDGET_SECONDS)
    async with LoopWatch() as watch:
        before = watch.ticks
        [record] = await scoring.score(output, item(expected))
        during = watch.ticks - before
    assert (record.error, record.passed, watch.blocked) == ("", passed, False)
    # Scored in a worker: the loop went on ticking until the outcome came back.
    # On the loop, the call would have returned before the ticker ran again.
    assert during >= 1


def stuck_runner(count: int, timeout: float) -> ItemRunner:
    return ItemRunner(
        target=None,  # type: ignore[arg-type]  # only scoring is exercised
        scorers=[StuckScorer(f"stuck{n}", {}) for n in range(count)],  # type: ignore[misc]
        options=RunOptions(scorer_timeout_seconds=timeout),
    )


async def test_a_project_past_its_share_of_scorer_workers_times_out_saying_so():
    shares = thread_shares()
    workers = scorer_pool()._max_workers
    scoring = stuck_runner(shares.limit + 1, 0.3)
    StuckScorer.release.clear()
    try:
        with scoring_for("project 1"):
            records = await scoring.score("out", item("x"))
    finally:
        StuckScorer.release.set()
    errors = sorted(record.error for record in records)
    waited = (
        "scorer exceeded 0.3 s waiting for a free scorer worker: this project's "
        f"runs already use {shares.limit} of the {workers}, the most one project may"
    )
    assert errors == ["scorer exceeded 0.3 s"] * shares.limit + [waited]


async def test_a_scorer_waiting_for_a_busy_pool_times_out_saying_so():
    shares = thread_shares()
    workers = scorer_pool()._max_workers
    StuckScorer.release.clear()
    StuckScorer.inside = 0
    # Projects holding their share each, until every worker is taken.
    holders = []
    for n in range(-(-workers // shares.limit)):
        count = min(shares.limit, workers - n * shares.limit)
        with scoring_for(f"project {n}"):
            scoring = stuck_runner(count, BUDGET_SECONDS)
            holders.append(asyncio.ensure_future(scoring.score("out", item("x"))))
    try:
        await wait_until(
            lambda: StuckScorer.inside == workers, "every worker taken by a holder"
        )
        with scoring_for("another project"):
            [record] = await stuck_runner(1, 0.3).score("out", item("x"))
    finally:
        StuckScorer.release.set()
        await asyncio.gather(*holders)
    assert record.error == (
        f"scorer exceeded 0.3 s waiting for a free scorer worker (all {workers} busy)"
    )
