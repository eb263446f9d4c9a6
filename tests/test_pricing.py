"""The price table: settings, admin rows on top, exact names and prefixes."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.core.exceptions import ImproperlyConfigured, ValidationError

from evalsite.env import env_prices
from runs.calls.pricing import (
    Price,
    PriceTable,
    cost_of,
    price_table,
    token_count,
    usd,
    use_prices,
)
from runs.models import ModelPrice

TABLE = PriceTable(
    {
        "gpt-4o": Price(2.5, 10.0),
        "gpt-4o*": Price(5.0, 15.0),
        "gpt-4o-mini*": Price(0.15, 0.6),
        "claude-3-5-haiku": Price(0.8, 4.0),
    }
)


def test_cost_is_tokens_times_price_per_million():
    # 1,000 prompt tokens at $0.80/M + 500 completion at $4/M.
    assert TABLE.cost("claude-3-5-haiku", 1000, 500) == pytest.approx(0.0028)


def test_an_exact_name_wins_over_a_prefix():
    assert TABLE.price("gpt-4o") == Price(2.5, 10.0)


def test_the_longest_prefix_wins():
    assert TABLE.price("gpt-4o-mini-2024-07-18") == Price(0.15, 0.6)
    assert TABLE.price("gpt-4o-2024-08-06") == Price(5.0, 15.0)


def test_an_unknown_model_has_no_price_and_no_cost():
    assert TABLE.price("llama-3") is None
    assert TABLE.cost("llama-3", 10, 10) is None
    assert TABLE.cost("", 10, 10) is None and TABLE.cost(None, 10, 10) is None


def test_a_prefix_is_not_a_partial_name():
    # "claude-3-5-haiku" is exact: a longer name is another model.
    assert TABLE.price("claude-3-5-haiku-latest") is None


def test_names_are_case_sensitive_as_endpoints_report_them():
    assert TABLE.price("GPT-4o") is None


def test_zero_tokens_cost_zero_a_real_figure():
    assert TABLE.cost("gpt-4o", 0, 0) == 0.0


@pytest.mark.parametrize(
    ("prompt", "completion"),
    [(None, 5), (5, None), ("5", 5), (-1, 5), (True, 5), (2.5, 5), (float("nan"), 5)],
)
def test_an_unknown_or_malformed_count_gives_no_cost(prompt, completion):
    assert TABLE.cost("gpt-4o", prompt, completion) is None


def test_token_counts_as_endpoints_send_them():
    assert token_count(12) == 12
    assert token_count(12.0) == 12  # some servers send floats
    assert token_count("12") is None
    assert token_count(None) is None


def test_a_table_survives_its_json_form():
    assert PriceTable.from_json(TABLE.to_json()).entries == TABLE.entries


def test_cost_of_reads_the_current_run_table_without_a_database():
    with use_prices(TABLE):
        assert cost_of("gpt-4o", 1_000_000, 0) == pytest.approx(2.5)
    assert cost_of("gpt-4o", 1_000_000, 0, table=TABLE) == pytest.approx(2.5)


@pytest.mark.parametrize(
    ("amount", "text"),
    [(5, "$5.00"), (0.25, "$0.25"), (1234.5, "$1,234.50"), (0.0028, "$0.0028")],
)
def test_dollars_as_people_read_them(amount, text):
    assert usd(amount) == text


# -- the table: settings, then the admin's rows --------------------------------


@pytest.mark.django_db
def test_settings_prices_are_the_table_when_the_admin_has_none(settings):
    settings.EVALSITE_PRICES = {"m1": (1.0, 2.0)}
    assert price_table().price("m1") == Price(1.0, 2.0)


@pytest.mark.django_db
def test_an_admin_row_beats_the_settings_entry_of_the_same_name(settings):
    settings.EVALSITE_PRICES = {"m1": (1.0, 2.0), "m2": (3.0, 4.0)}
    ModelPrice.objects.create(
        model="m1", prompt_per_million=Decimal("0.5"), completion_per_million=1
    )
    table = price_table()
    assert table.price("m1") == Price(0.5, 1.0)
    assert table.price("m2") == Price(3.0, 4.0)


@pytest.mark.django_db
def test_an_admin_prefix_row_prices_every_version_of_a_model(settings):
    settings.EVALSITE_PRICES = {}
    ModelPrice.objects.create(
        model="mistral-large*", prompt_per_million=2, completion_per_million=6
    )
    assert price_table().cost("mistral-large-2411", 1_000_000, 1_000_000) == 8.0


@pytest.mark.django_db
def test_the_shipped_table_prices_only_the_demo_model():
    table = price_table()
    assert table.price("demo") is not None
    assert table.price("gpt-4o") is None


@pytest.mark.parametrize("name", ["gpt*4", " gpt-4o", "gpt-4o ", "**", "a*b*"])
def test_an_admin_model_name_may_only_end_in_a_star(name):
    row = ModelPrice(model=name, prompt_per_million=1, completion_per_million=1)
    with pytest.raises(ValidationError) as caught:
        row.full_clean(validate_unique=False)
    assert "model" in caught.value.message_dict


@pytest.mark.parametrize("name", ["gpt-4o", "gpt-4o*", "*", "Meta Llama 3.1 70B"])
def test_admin_model_names_that_are_accepted(name):
    row = ModelPrice(model=name, prompt_per_million=1, completion_per_million=1)
    row.full_clean(validate_unique=False)


def test_a_negative_admin_price_is_refused():
    row = ModelPrice(model="m", prompt_per_million=-1, completion_per_million=1)
    with pytest.raises(ValidationError) as caught:
        row.full_clean(validate_unique=False)
    assert "prompt_per_million" in caught.value.message_dict


# -- EVALSITE_PRICES -------------------------------------------------------------


def test_env_prices_read_both_forms(monkeypatch):
    monkeypatch.setenv(
        "P", '{"a": [1, 2.5], "b*": {"prompt": 0.1, "completion": 0.2}, "é": [0, 0]}'
    )
    assert env_prices("P", {}) == {"a": (1.0, 2.5), "b*": (0.1, 0.2), "é": (0.0, 0.0)}


def test_env_prices_default_when_unset_or_blank(monkeypatch):
    monkeypatch.delenv("P", raising=False)
    assert env_prices("P", {"demo": [1, 2]}) == {"demo": (1.0, 2.0)}
    monkeypatch.setenv("P", "  ")
    assert env_prices("P", {"demo": [1, 2]}) == {"demo": (1.0, 2.0)}


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        ("{not json", "must be JSON"),
        ("[1, 2]", "JSON object"),
        ('{"a": [1]}', "'a'"),
        ('{"a": [-1, 2]}', "non-negative"),
        ('{"a": [true, 2]}', "non-negative"),
        ('{"a": ["1", 2]}', "non-negative"),
        ('{"a": {"prompt": 1}}', "'a'"),
        ('{"a*b": [1, 2]}', "may only end it"),
        ('{" a": [1, 2]}', "not a model name"),
    ],
)
def test_env_prices_name_what_is_wrong(monkeypatch, raw, words):
    monkeypatch.setenv("P", raw)
    with pytest.raises(ImproperlyConfigured) as caught:
        env_prices("P", {})
    assert "P" in str(caught.value) and words in str(caught.value)
