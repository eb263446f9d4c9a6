"""One item, start to end: its attempts against the target, then its scores."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from runs.calls.limits import AdaptiveConcurrency, CallRate, RateLimiter, RetryBudget
from runs.calls.pricing import PriceTable, token_count
from runs.calls.retry import (
    Backoff,
    RetryPolicy,
    RetryTokens,
    RunRetries,
    use_run_retries,
)
from runs.executor.clock import iso_now, now
from runs.executor.deadlines import attempt_deadline
from runs.executor.options import RunOptions
from runs.executor.store import ItemData, ResultRecord, ScoreRecord
from runs.models import ErrorKind, Result
from runs.plugins.scorers import Condition, ScoreOutcome, Scorer, ScorerError
from runs.plugins.scoring import ScorerCall
from runs.plugins.steps import Step, put_step_texts, step_texts
from runs.plugins.targets import Target, TargetError, TargetInput, TargetOutput
from runs.secrets.redaction import NO_SECRETS, Redactor

RAW_BODY_LIMIT = 20_000
MODEL_CHARS = 200  # as Result.model
PRICED_NAMES = 1_024  # reported model names whose pricing a runner remembers
__all__ = ["ItemRunner", "Limits", "WorkItem"]


@dataclass(slots=True)
class WorkItem:
    item: ItemData
    epoch: int

    def target_input(self) -> TargetInput:
        return TargetInput(
            index=self.item.index,
            external_id=self.item.external_id,
            input=self.item.input,
            expected=self.item.expected,
            metadata=self.item.metadata or {},
            epoch=self.epoch,
        )

    def new_record(self) -> ResultRecord:
        started_at = now()
        return ResultRecord(
            item_id=self.item.pk,
            item_index=self.item.index,
            epoch=self.epoch,
            status=Result.Status.FAILED,
            output=None,
            attempts=[],
            started_at=started_at,
            finished_at=started_at,
        )


@dataclass(slots=True)
class Failure:
    kind: ErrorKind
    error_type: str
    message: str
    status: str
    retry_after: float | None = None
    # The target's own attempts of its failing call (TargetError.call_attempts).
    call_attempts: int = 0


def cut_attempt(attempt: dict[str, Any]) -> None:
    """Cut an attempt's raw body and model to their stored lengths, once any
    secret in them is replaced: cut before, a secret across the cut would
    keep its first part, which no redaction finds."""
    for key, limit in (("raw_body", RAW_BODY_LIMIT), ("model", MODEL_CHARS)):
        if len(attempt.get(key) or "") > limit:
            attempt[key] = attempt[key][:limit]


def close_interrupted(record: ResultRecord, redactor: Redactor) -> None:
    """Ready an item cut short by a stop to be stored: every secret in its
    output, attempt log and steps replaced here, on the loop (the stop cannot
    wait for a worker thread), its attempts cut, its end time set."""
    if redactor:
        record.output = redactor.value(record.output)
        record.attempts = redactor.value(record.attempts)
        if record.steps:
            put_step_texts(record.steps, redactor.value(step_texts(record.steps)))
    for attempt in record.attempts:
        cut_attempt(attempt)
    record.finished_at = now()


class Concurrency(Protocol):
    limit: int
    latency: float | None  # recent calls', in seconds

    @property
    def backing_off(self) -> bool: ...

    def slot(self) -> contextlib.AbstractAsyncContextManager[None]: ...

    def succeeded(
        self, latency: float | None = None, *, started: float | None = None
    ) -> None: ...

    def throttled(self) -> None: ...

    def timed_out(self, *, started: float | None = None) -> None: ...


@dataclass(frozen=True, slots=True)
class Limits:
    """What paces an item runner's calls: its concurrency, its request rate
    and its retry budget. Built by one owner: these, local to the runner, or
    an execution's, shared with every other (``shared_limits.Pacing``)."""

    concurrency: Concurrency
    rate: CallRate | None
    budget: RetryTokens

    @classmethod
    def local(cls, options: RunOptions) -> Limits:
        return cls(
            concurrency=AdaptiveConcurrency(
                options.concurrency, adaptive=options.adaptive_concurrency
            ),
            rate=RateLimiter(options.rate_limit_rpm)
            if options.rate_limit_rpm
            else None,
            budget=RetryBudget(options.retry_budget),
        )


class ItemRunner:
    """Runs items against one target with the run's pacing and scorers."""

    def __init__(
        self,
        *,
        target: Target,
        scorers: list[Scorer],
        options: RunOptions,
        conditions: Mapping[str, Condition] | None = None,
        prices: PriceTable | None = None,
        model: str | None = None,
        redactor: Redactor = NO_SECRETS,
        limits: Limits | None = None,
    ) -> None:
        self.target = target
        self.scorers = scorers
        # name -> the condition under which that scorer runs (``when``).
        self.conditions = dict(conditions or {})
        self.options = options
        # The run's frozen price table, and the model its target is configured
        # with (priced when the endpoint's reported model has no price).
        self.prices = prices if prices is not None else PriceTable({})
        self.model = model
        # A reported model name -> the name its tokens are priced by (itself,
        # else the configured model), or None when neither has a price: found
        # once per name, not for every attempt (``priced_name``).
        self.priced_names: dict[str, str | None] = {}
        # The secrets of the run's target and scorers, replaced in every text
        # an item leaves (``redact_attempt``, ``redact_scores``).
        self.redactor = redactor
        # Given by the execution (shared across processes), else its own.
        limits = limits or Limits.local(options)
        self.concurrency = limits.concurrency
        self.rate = limits.rate
        self.budget = limits.budget
        self.retry_policy = RetryPolicy(
            options.max_attempts,
            options.timeout_seconds,
            Backoff(options.backoff_base_seconds, options.backoff_max_seconds),
        )
        # The same rules for a target that retries its own calls (an agent's).
        self.call_retries = RunRetries(
            options.max_attempts, self.retry_policy.backoff, self.budget
        )

    async def run(self, work: WorkItem, record: ResultRecord) -> None:
        """Fill ``record`` with the item's final outcome and its scores."""
        item = work.target_input()
        await self.attempt_until_final(item, record)
        if record.status == Result.Status.SUCCEEDED:
            record.scores = await self.score(record.output, item, steps=record.steps)
            add_scorer_cost(record)
        record.finished_at = now()

    async def attempt_until_final(
        self, item: TargetInput, record: ResultRecord
    ) -> None:
        options = self.options
        for number in range(1, options.max_attempts + 1):
            if self.rate is not None:
                await self.rate.acquire()
            attempt: dict[str, Any] = {"number": number}
            record.attempts.append(attempt)
            record.steps = None  # the steps of the attempt that gives the outcome
            async with self.concurrency.slot():
                attempt["started_at"] = iso_now()
                began = time.monotonic()
                failure = await self.attempt(item, record, attempt)
                latency = round((time.monotonic() - began) * 1000, 3)
            if self.redactor:
                failure = await self.redact_attempt(record, attempt, failure)
            cut_attempt(attempt)
            attempt.update(finished_at=iso_now(), latency_ms=latency)
            add_usage(record)
            if failure is None:
                self.concurrency.succeeded(latency / 1000, started=began)
                record.latency_ms = latency
                return
            if attempt.get("http_status") == 429:
                self.concurrency.throttled()
            elif failure.status == Result.Status.TIMED_OUT:
                self.concurrency.timed_out(started=began)
            self.record_failure(record, attempt, failure)
            if not self.retry_policy.retries(number, failure):
                return
            if failure.call_attempts:
                # Its calls were retried as they were made: run again, the
                # item would repeat them all, and their retries with them.
                attempt["note"] = (
                    "not run again: the target's failing call had "
                    f"{failure.call_attempts} attempt(s) of its own"
                )
                return
            if not await self.budget.take():
                attempt["note"] = "the run's retry budget is spent: not retried"
                return
            await asyncio.sleep(self.retry_policy.delay(number, failure))

    async def attempt(
        self, item: TargetInput, record: ResultRecord, attempt: dict[str, Any]
    ) -> Failure | None:
        """One call under the per-attempt timeout; None when it succeeded."""
        try:
            async with attempt_deadline(self.retry_policy.timeout):
                with use_run_retries(self.call_retries):
                    answer = await self.target.generate(item)
        except TimeoutError:
            attempt["outcome"] = "timeout"
            message = f"attempt exceeded {self.retry_policy.timeout:g} s"
            return Failure(
                ErrorKind.TIMEOUT, "Timeout", message, Result.Status.TIMED_OUT
            )
        except TargetError as exc:
            attempt.update(outcome="error", http_status=exc.http_status)
            if exc.usage is not None:
                self.account(attempt, exc.usage)
                record.steps = exc.usage.steps or None
            if exc.raw_body is not None:
                attempt["raw_body"] = exc.raw_body
            return Failure(
                exc.kind,
                exc.error_type,
                exc.message,
                Result.Status.FAILED,
                exc.retry_after,
                exc.call_attempts,
            )
        except Exception as exc:  # a target's bug must not kill the run: record it
            attempt["outcome"] = "error"
            return Failure(
                ErrorKind.PERMANENT,
                type(exc).__name__,
                str(exc) or type(exc).__name__,
                Result.Status.FAILED,
            )
        attempt.update(outcome="ok", http_status=answer.http_status)
        if answer.raw_body is not None:
            attempt["raw_body"] = answer.raw_body
        if answer.finish_reason:
            # "length": the answer was cut at max_tokens (the result page says so).
            attempt["finish_reason"] = str(answer.finish_reason)[:40]

        self.account(attempt, answer)
        record.steps = answer.steps or None
        record.status = Result.Status.SUCCEEDED
        record.output = answer.output
        record.error_kind = record.error_type = record.error_message = ""
        return None

    async def redact_attempt(
        self, record: ResultRecord, attempt: dict[str, Any], failure: Failure | None
    ) -> Failure | None:
        """The attempt's texts with every secret replaced: its log entry (raw
        body, model), its output or its error, and its steps (what was sent
        and received, names and errors). Before a scorer sees the output or
        the trajectory (a judge would send them on) and before anything is
        stored."""
        steps = record.steps or []
        texts = [attempt, record.output if failure is None else None, step_texts(steps)]
        if failure is not None:
            texts += [failure.message, failure.error_type]
        clean = await self.redactor.redacted(texts)
        if clean is texts:
            return failure  # the usual case: no secret, nothing copied
        attempt.clear()
        attempt.update(clean[0])
        put_step_texts(steps, clean[2])
        if failure is None:
            record.output = clean[1]
            return None
        failure.message, failure.error_type = clean[3], clean[4]
        return failure

    def account(self, attempt: dict[str, Any], usage: TargetOutput) -> None:
        """Put an attempt's tokens, model and cost in its log entry.

        A cost the target reports is kept; otherwise its tokens are priced by
        the model the endpoint reported, else by the configured one.
        """
        prompt = token_count(usage.prompt_tokens)
        completion = token_count(usage.completion_tokens)
        model = usage.model if isinstance(usage.model, str) else None
        # Cut where the attempt is recorded, once any secret in it is replaced.
        model = model or self.model or ""
        cost = usage.cost
        # A trajectory whose model calls used tokens costs what they cost.
        by_steps = bool(usage.steps) and self.price_steps(usage.steps or [])
        if cost is None and by_steps:
            cost = total_cost(
                (s.prompt_tokens is not None or s.completion_tokens is not None, s.cost)
                for s in usage.steps or []
                if s.kind == "model"
            )
        elif cost is None and (priced := self.priced_name(model)) is not None:
            cost = self.prices.cost(priced, prompt, completion)
        for key, value in (
            ("prompt_tokens", prompt),
            ("completion_tokens", completion),
            ("model", model),
            ("cost", cost),
        ):
            if value is not None and value != "":
                attempt[key] = value

    def priced_name(self, model: str) -> str | None:
        """The model whose price prices ``model``'s tokens: itself, else the
        configured one; None when neither has a price (no cost). The run's
        table is frozen, so a name's answer holds for the run."""
        try:
            return self.priced_names[model]
        except KeyError:
            pass
        priced = self.prices.priced_model([model, self.model])
        if len(self.priced_names) < PRICED_NAMES:
            self.priced_names[model] = priced
        return priced

    def price_steps(self, steps: list[Step]) -> bool:
        """Price the model calls of a trajectory that have no cost (by the
        model that answered, else the configured one); whether any used
        tokens (then the result's cost is the sum of its steps')."""
        used_any = False
        for step in steps:
            used = step.prompt_tokens is not None or step.completion_tokens is not None
            if step.kind != "model" or not used:
                continue
            used_any = True
            if step.cost is None:
                priced = self.prices.priced_model([step.name, self.model])
                step.cost = self.prices.cost(
                    priced or step.name,
                    token_count(step.prompt_tokens),
                    token_count(step.completion_tokens),
                )
        return used_any

    @staticmethod
    def record_failure(
        record: ResultRecord, attempt: dict[str, Any], failure: Failure
    ) -> None:
        attempt.update(
            error_kind=failure.kind,
            error_type=failure.error_type,
            error_message=failure.message[:2000],
        )
        record.status = failure.status
        record.error_kind = failure.kind
        record.error_type = failure.error_type
        record.error_message = failure.message

    async def score(
        self,
        output: Any,
        item: TargetInput,
        *,
        stored: Mapping[str, ScoreRecord] | None = None,
        steps: list[Step] | None = None,
    ) -> list[ScoreRecord]:
        """Every scorer of the item, concurrently; CPU work off the loop; every
        secret replaced in their reasons, errors and models (a judge's reply may
        echo its key).

        A conditional scorer waits for the scorer its condition names (always
        declared before it) and is skipped, with the reason, when the
        condition does not hold. A condition on a scorer that is not among
        these (a re-score of some of a run's scorers) reads that scorer's
        stored score, from ``stored``. A scorer that declares ``needs_steps``
        gets ``steps``, the result's trajectory.
        """
        if len(self.scorers) == 1 and not self.conditions:
            scores = [await self.score_one(self.scorers[0], output, item, steps)]
        else:
            tasks: dict[str, asyncio.Future[ScoreRecord]] = {}
            for scorer in self.scorers:  # in spec order: a condition's scorer is made
                condition = self.conditions.get(scorer.name)
                if condition is None:
                    call = self.score_one(scorer, output, item, steps)
                elif condition.scorer in tasks:
                    first = tasks[condition.scorer]
                    call = self.score_when(
                        scorer, condition, first, output, item, steps
                    )
                elif (before := (stored or {}).get(condition.scorer)) is not None:
                    done = asyncio.get_running_loop().create_future()
                    done.set_result(before)
                    call = self.score_when(scorer, condition, done, output, item, steps)
                else:  # not among these scorers, nor stored
                    reason = f"skipped: {condition.scorer} did not run"
                    call = self.skipped(scorer, reason)
                tasks[scorer.name] = asyncio.ensure_future(call)
            scores = list(await asyncio.gather(*tasks.values()))
        if self.redactor:
            texts = [[s.reason, s.error, s.model] for s in scores]
            clean = await self.redactor.redacted(texts)
            if clean is not texts:
                for score, (reason, error, model) in zip(scores, clean, strict=True):
                    score.reason, score.error, score.model = reason, error, model
        return scores

    @staticmethod
    async def skipped(scorer: Scorer, reason: str) -> ScoreRecord:
        return ScoreRecord(scorer.name, None, None, reason=reason, skipped=True)

    async def score_when(
        self,
        scorer: Scorer,
        condition: Condition,
        first: asyncio.Future[ScoreRecord],
        output: Any,
        item: TargetInput,
        steps: list[Step] | None = None,
    ) -> ScoreRecord:
        before = await asyncio.shield(first)  # its own task; others wait for it too
        reason = condition.skip_reason(
            passed=before.passed, errored=bool(before.error), skipped=before.skipped
        )
        if reason:
            return await self.skipped(scorer, reason)
        return await self.score_one(scorer, output, item, steps)

    async def score_one(
        self,
        scorer: Scorer,
        output: Any,
        item: TargetInput,
        steps: list[Step] | None = None,
    ) -> ScoreRecord:
        timeout = self.options.scorer_timeout_seconds
        call = ScorerCall(scorer, output, item, steps)
        if call.inline():
            # Microseconds on the loop (scoring.py): nothing to time out or
            # to wait a turn for.
            return self.score_inline(call)
        # A scorer with its own concurrency limit (a judge): waiting for a
        # turn is not its work, so the scorer timeout starts once it has one.
        try:
            async with scorer.turn():
                async with asyncio.timeout(timeout):
                    outcome = await call.run()
        except TimeoutError:
            return ScoreRecord(
                scorer.name, None, None, error=call.timeout_message(timeout)
            )
        except Exception as exc:
            return score_error(scorer, exc)
        return score_record(scorer, outcome)

    @staticmethod
    def score_inline(call: ScorerCall) -> ScoreRecord:
        try:
            outcome = call.compute()
        except Exception as exc:
            return score_error(call.scorer, exc)
        return score_record(call.scorer, outcome)


def score_error(scorer: Scorer, exc: Exception) -> ScoreRecord:
    """The score of a scorer that raised ``exc``: one scorer's error never
    hides the others."""
    if isinstance(exc, ScorerError):
        return ScoreRecord(
            scorer.name,
            None,
            None,
            reason=exc.reason,
            error=exc.message or type(exc).__name__,
            prompt_tokens=exc.prompt_tokens,
            completion_tokens=exc.completion_tokens,
            cost=exc.cost,
            model=exc.model,
        )
    return ScoreRecord(scorer.name, None, None, error=f"{type(exc).__name__}: {exc}")


def score_record(scorer: Scorer, outcome: ScoreOutcome) -> ScoreRecord:
    return ScoreRecord(
        scorer.name,
        outcome.value,
        outcome.passed,
        reason=outcome.reason,
        prompt_tokens=outcome.prompt_tokens,
        completion_tokens=outcome.completion_tokens,
        cost=outcome.cost,
        model=outcome.model,
    )


def _plus(total: Any, value: Any) -> Any:
    return value if total is None else total if value is None else total + value


def total_cost(calls: Iterable[tuple[bool, float | None]]) -> float | None:
    """The sum of what calls cost, given (used tokens, cost) of each: None
    when one that used tokens has no price, or when none reported a cost."""
    total = None
    for used, cost in calls:
        if used and cost is None:
            return None
        total = _plus(total, cost)
    return total


def add_scorer_cost(record: ResultRecord) -> None:
    """A result's cost includes what its scorers (judges) spent; it is None
    when a judge used tokens that have no price, as for the target's."""
    target_used = (
        record.prompt_tokens is not None or record.completion_tokens is not None
    )
    record.cost = total_cost(
        [
            (target_used, record.cost),
            *(
                (s.prompt_tokens is not None or s.completion_tokens is not None, s.cost)
                for s in record.scores
            ),
        ]
    )


def add_usage(record: ResultRecord) -> None:
    """The result's tokens and cost: the sum over its attempts.

    Its cost is None when an attempt that used tokens has no price (a sum of
    the others would pass for the whole), or when none reported any.
    """
    prompt = completion = cost = None
    unpriced = False
    for attempt in record.attempts:
        used = "prompt_tokens" in attempt or "completion_tokens" in attempt
        prompt = _plus(prompt, attempt.get("prompt_tokens"))
        completion = _plus(completion, attempt.get("completion_tokens"))
        cost = _plus(cost, attempt.get("cost"))
        unpriced = unpriced or (used and attempt.get("cost") is None)
        record.model = attempt.get("model") or record.model
    record.prompt_tokens, record.completion_tokens = prompt, completion
    record.cost = None if unpriced else cost
