"""Tokens into US dollars: one price table, one function, used everywhere.

The table is ``EVALSITE_PRICES`` (settings) with the admin's ``ModelPrice``
rows on top: a row replaces the entry of the same name. A name ending in
``*`` is a prefix; a model's exact name wins, then the longest prefix.

A run uses the table as it was when it first started: the executor freezes it
on the run (``Run.prices``) and makes it current for everything the run does
(``use_prices``), so an edit while the run goes never gives it two prices.
``cost_of`` reads that table, and is plain arithmetic over it: safe on the
event loop. A judge reports its tokens and model and calls ``cost_of``.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from django.conf import settings

PER = 1_000_000  # prices are per million tokens
PREFIX_MEMO = 1_024  # names whose price by prefix a table remembers


@dataclass(frozen=True, slots=True)
class Price:
    """US dollars per million prompt and completion tokens."""

    prompt: float
    completion: float


class PriceTable:
    """Prices by model name, exact names and ``prefix*`` patterns."""

    def __init__(self, entries: Mapping[str, Price]) -> None:
        self.entries = dict(entries)
        self.exact = {k: v for k, v in self.entries.items() if not k.endswith("*")}
        # Longest prefix first: "gpt-4o-mini*" before "gpt-4o*".
        self.prefixes = sorted(
            ((k[:-1], v) for k, v in self.entries.items() if k.endswith("*")),
            key=lambda pair: -len(pair[0]),
        )
        # A name's price by prefix, or None, once found: the executor asks
        # for every result, and a name that has none scans every prefix.
        self.by_prefix: dict[str, Price | None] = {}

    def price(self, model: str | None) -> Price | None:
        if not model:
            return None
        found = self.exact.get(model)
        if found is not None:
            return found
        try:
            return self.by_prefix[model]
        except KeyError:
            pass
        found = next(
            (p for prefix, p in self.prefixes if model.startswith(prefix)), None
        )
        if len(self.by_prefix) < PREFIX_MEMO:
            self.by_prefix[model] = found
        return found

    def priced_model(self, models: Iterable[str | None]) -> str | None:
        """The first of ``models`` that has a price."""
        return next((m for m in models if self.price(m) is not None), None)

    def cost(
        self, model: str | None, prompt_tokens: Any, completion_tokens: Any
    ) -> float | None:
        price = self.price(model)
        prompt, completion = token_count(prompt_tokens), token_count(completion_tokens)
        if price is None or prompt is None or completion is None:
            return None
        return round((prompt * price.prompt + completion * price.completion) / PER, 12)

    def to_json(self) -> dict[str, list[float]]:
        return {k: [v.prompt, v.completion] for k, v in sorted(self.entries.items())}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PriceTable:
        return cls({k: Price(float(v[0]), float(v[1])) for k, v in data.items()})


def token_count(value: Any) -> int | None:
    """A token count as an endpoint reports it, or None when it is not one."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        return None
    return int(value) if value >= 0 else None


def price_table() -> PriceTable:
    """The table now: settings, with the admin's rows on top (reads the database)."""
    from runs.models import ModelPrice

    entries = {
        model: Price(float(prompt), float(completion))
        for model, (prompt, completion) in settings.EVALSITE_PRICES.items()
    }
    for model, prompt, completion in ModelPrice.objects.values_list(
        "model", "prompt_per_million", "completion_per_million"
    ):
        entries[model] = Price(float(prompt), float(completion))
    return PriceTable(entries)


_current: contextvars.ContextVar[PriceTable | None] = contextvars.ContextVar(
    "evalsite_prices", default=None
)


@contextlib.contextmanager
def use_prices(table: PriceTable) -> Iterator[PriceTable]:
    """Make ``table`` the one ``cost_of`` reads, in this context and its tasks."""
    token = _current.set(table)
    try:
        yield table
    finally:
        _current.reset(token)


def current_prices() -> PriceTable:
    """The run's frozen table inside a run; elsewhere the table now (sync only)."""
    table = _current.get()
    return table if table is not None else price_table()


def cost_of(
    model: str | None,
    prompt_tokens: int | None,
    completion_tokens: int | None,
    *,
    table: PriceTable | None = None,
) -> float | None:
    """What the tokens cost in US dollars; None when the model has no price or
    a count is unknown (never a made-up 0).

    Inside a run (the executor's context) the run's frozen table is used and
    no database is read; outside one, pass ``table`` from async code.
    """
    return (table or current_prices()).cost(model, prompt_tokens, completion_tokens)


def configured_model(config: Mapping[str, Any]) -> str | None:
    """The model a target's configuration names, if it names one."""
    model = config.get("model")
    return model if isinstance(model, str) and model else None


def usd(amount: float) -> str:
    """``$5.00``, ``$0.25``; below a cent as many digits as it takes."""
    if amount == round(amount, 2) or abs(amount) >= 1:
        return f"${amount:,.2f}"
    return f"${amount:.6f}".rstrip("0")
