"""Spans taken in: each step attached to its result, once, in time order.

Only a member who may edit a run's project attaches steps to its results; a
request naming a run of another project is refused exactly as one naming a
run that does not exist (404), and a viewer's is refused (403), with nothing
stored. A span of a result not stored yet, in a run still
going, asks the exporter to send again later (OTLP exporters retry a 503):
agents export as they go, often before their answer is stored. A span sent
twice (a retried export) is stored once: its span id is unique per result.
A span quotes what an agent's model and tools were sent: its step is
redacted of the run's secrets (its target's and scorers', as its executor
redacts a target's steps) before it is stored, and refused when those
secrets cannot be read.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction

from runs.access import Action, require
from runs.errors import ConfigError, NotFound
from runs.models import Result, Run, Step
from runs.plugins.steps import put_step_texts, step_texts
from runs.records.versions import results_changed
from runs.secrets.redaction import Redactor
from runs.secrets.store import run_scorer_contexts, run_target_context
from runs.traces.otlp import Span
from runs.traces.spans import Address, address_of, step_of, stored_fields

# The exporter is asked to retry after this many seconds while a span's result
# is not stored yet.
RETRY_SECONDS = 2


@dataclass(slots=True)
class Intake:
    """What became of a request's spans."""

    steps: int = 0  # steps stored (new ones)
    not_steps: int = 0  # spans that are no model or tool call
    rejected: int = 0
    reasons: list[str] = field(default_factory=list)
    # A span's result is not stored yet in a running run: send again later.
    later: bool = False

    def reject(self, count: int, reason: str) -> None:
        self.rejected += count
        if reason not in self.reasons and len(self.reasons) < 10:
            self.reasons.append(reason)


def take_spans(*, user: User, spans: list[Span]) -> Intake:
    """Attach the steps among ``spans`` to the results they name.

    NotFound when a span names a run or result ``user`` cannot see (or that
    does not exist: the same answer), Forbidden when they may see but not
    edit it; then nothing is stored.
    """
    intake = Intake()
    by_address = _addressed(spans, intake)
    results = {address: _result(user, address, intake) for address in by_address}
    redactors: dict[int, Redactor | str] = {}
    for address, pairs in by_address.items():
        result = results[address]
        if isinstance(result, str):
            intake.reject(len(pairs), result)
            continue
        if result.run_id not in redactors:
            redactors[result.run_id] = _run_redactor(result.run_id)
        redactor = redactors[result.run_id]
        if isinstance(redactor, str):
            intake.reject(len(pairs), redactor)
            continue
        _redact(redactor, [step for _, step in pairs])
        intake.steps += _attach(result, pairs)
    return intake


def _run_redactor(run_id: int) -> Redactor | str:
    """The redactor of the run's secrets (its target's and scorers'), as its
    executor has it; or why there is none (its secrets cannot be read now)."""
    kind, config, scorers = (
        Run.objects.filter(pk=run_id)
        .values_list("target_kind", "target_config", "scorers")
        .get()
    )
    try:
        contexts = [
            run_target_context(run_id, kind, config),
            *run_scorer_contexts(run_id, scorers).values(),
        ]
    except ConfigError as exc:
        return f"run {run_id}: its secrets cannot be read to redact its steps: {exc}"
    return _redactor(
        tuple(pair for context in contexts for pair in context.secrets.items())
    )


@functools.lru_cache(maxsize=32)
def _redactor(secrets: tuple[tuple[str, str], ...]) -> Redactor:
    # Compiled once for the many requests of a run's agents (tens of ms each).
    return Redactor(secrets)


def _redact(redactor: Redactor, steps: list[Any]) -> None:
    """Replace the run's secrets in the steps, as the executor does in a
    target's: an agent's spans quote what its model and tools were sent."""
    texts = step_texts(steps)
    clean = redactor.value(texts)
    if clean is not texts:
        put_step_texts(steps, clean)


def _addressed(
    spans: list[Span], intake: Intake
) -> dict[Address, list[tuple[Span, Any]]]:
    """The step spans by the result they name (or their trace names)."""
    traces: dict[str, Address] = {}
    own: dict[str, Address | None] = {}
    for span in spans:
        try:
            own[span.span_id] = address_of(span.attributes)
        except ValueError as exc:
            own[span.span_id] = None
            intake.reject(1, f"span {span.span_id}: {exc}")
            continue
        if own[span.span_id] is not None and span.trace_id not in traces:
            traces[span.trace_id] = own[span.span_id]  # type: ignore[assignment]  # checked just above
    grouped: dict[Address, list[tuple[Span, Any]]] = defaultdict(list)
    for span in spans:
        step = step_of(span)
        if step is None:
            intake.not_steps += 1
            continue
        address = own.get(span.span_id) or traces.get(span.trace_id)
        if address is None:
            intake.reject(
                1,
                "a span names no result: set evalsite.result_id, or "
                "evalsite.run_id and evalsite.item_index, on it or its trace",
            )
            continue
        grouped[address].append((span, step))
    return grouped


def _result(user: User, address: Address, intake: Intake) -> Result | str:
    """The result at ``address``, or why there is none to attach to (and
    ``intake`` marked to retry when it may still come)."""
    if address.result_id is not None:
        result = (
            Result.objects.select_related("run__project")
            .filter(pk=address.result_id, retry_pending=False)
            .first()
        )
        _may_edit(
            user, result.run if result else None, f"no result {address.result_id}"
        )
        assert result is not None  # _may_edit raised otherwise
        return result
    run = Run.objects.select_related("project").filter(pk=address.run_id or 0).first()
    _may_edit(user, run, f"no run {address.run_id}")
    assert run is not None
    where = address.lookup()
    result = Result.objects.filter(retry_pending=False, **where).first()
    if result is not None:
        return result
    said = f"item {address.item_index} epoch {address.epoch}"
    if not run.is_final:
        intake.later = True
        return f"run {run.pk} has not stored {said} yet"
    return f"run {run.pk} has no result for {said}"


def _may_edit(user: User, run: Run | None, missing: str) -> None:
    """NotFound(``missing``) for a run that is not there or not the user's to
    see, Forbidden for a viewer: the same answer for both of the first."""
    if run is None:
        raise NotFound(missing)
    try:
        require(user, run.project, Action.EDIT)
    except NotFound:
        raise NotFound(missing) from None


def _attach(result: Result, pairs: list[tuple[Span, Any]]) -> int:
    """Store the new steps of ``pairs``; the result's span steps renumbered by
    start time after its own (a target's) steps. Returns how many were new."""
    with transaction.atomic():
        Result.objects.select_for_update().filter(pk=result.pk).first()
        stored = list(Step.objects.filter(result=result).order_by("index"))
        own = [step for step in stored if not step.span_id]
        spanned = {step.span_id: step for step in stored if step.span_id}
        fresh = [
            Step(result=result, index=0, **stored_fields(step, span))
            for span, step in pairs
            if span.span_id not in spanned
        ]
        unique = {step.span_id: step for step in fresh}
        if not unique:
            return 0
        ordered = sorted(
            [*spanned.values(), *unique.values()],
            key=lambda step: (step.started_at is None, step.started_at, step.span_id),
        )
        Step.objects.filter(result=result).exclude(span_id="").delete()
        for position, step in enumerate(ordered, start=len(own)):
            step.pk = None
            step.index = position
        Step.objects.bulk_create(ordered)
        Run.objects.filter(pk=result.run_id, has_steps=False).update(has_steps=True)
        # What is kept of the run's results (its summary) is read again;
        # its scores are as they were.
        results_changed(result.run_id, scores_kept=True)
        return len(unique)
