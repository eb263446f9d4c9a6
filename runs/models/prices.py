"""What calls cost and what paces them: model prices and rate buckets."""

from __future__ import annotations

from django.core.validators import MinValueValidator, RegexValidator
from django.db import models


class ModelPrice(models.Model):
    """What a model's tokens cost, in US dollars per million.

    ``model`` is a model's exact name, or a prefix ending in ``*`` that prices
    every model whose name starts with it (``gpt-4o-mini*`` covers
    ``gpt-4o-mini-2024-07-18``); an exact name wins, then the longest prefix.
    A row replaces the entry of the same name in ``EVALSITE_PRICES``.
    """

    model = models.CharField(
        max_length=200,
        unique=True,
        validators=[
            RegexValidator(
                r"^(?:[^*\s](?:[^*]*[^*\s])?\*?|\*)$",
                "a model name, or a prefix ending in * (a * may only end it)",
            )
        ],
        help_text="The model's name as the endpoint reports it, or a prefix "
        "ending in * (an exact name wins, then the longest prefix).",
    )
    prompt_per_million = models.DecimalField(
        "prompt (USD per 1M tokens)",
        max_digits=12,
        decimal_places=6,
        validators=[MinValueValidator(0)],
    )
    completion_per_million = models.DecimalField(
        "completion (USD per 1M tokens)",
        max_digits=12,
        decimal_places=6,
        validators=[MinValueValidator(0)],
    )
    currency = models.CharField(max_length=3, default="USD", editable=False)
    note = models.CharField(
        max_length=200, blank=True, help_text="Where the price comes from, and when."
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["model"]

    def __str__(self) -> str:
        return (
            f"{self.model}: ${self.prompt_per_million} / ${self.completion_per_million}"
        )


class RateBucket(models.Model):
    """What paces calls to one target across processes, when there is no Redis.

    ``tat`` is the token bucket's theoretical arrival time (GCRA), in seconds
    of the database's clock; ``level`` counts the halvings of concurrency that
    a burst of 429s announced, in force until ``until``
    (``runs/executor/shared_limits.py``).
    """

    key = models.CharField(max_length=100, primary_key=True)
    tat = models.FloatField(default=0.0)
    level = models.PositiveIntegerField(default=0)
    last = models.FloatField(default=0.0)
    until = models.FloatField(default=0.0)

    def __str__(self) -> str:
        return self.key
