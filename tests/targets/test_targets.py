from __future__ import annotations

import pytest

from runs.errors import ConfigError
from runs.models import ErrorKind
from runs.targets import (
    TargetError,
    TargetInput,
    build_target,
    clean_target_config,
)
from runs.targets.openai_chat import classify_status, parse_retry_after, render_prompt


def item(input: object, **metadata: object) -> TargetInput:
    return TargetInput(
        index=0, external_id="i1", input=input, expected="4", metadata=metadata
    )


def test_prompt_template_fills_item_fields():
    text = render_prompt("Q: {input} ({metadata.topic})", item("2+2?", topic="math"))
    assert text == "Q: 2+2? (math)"


def test_prompt_template_naming_a_missing_field_is_a_permanent_error():
    with pytest.raises(TargetError, match=r"\{metadata\.nope\}") as caught:
        render_prompt("{metadata.nope}", item("x"))
    assert caught.value.kind == ErrorKind.PERMANENT


def test_prompt_template_cannot_reach_attributes():
    with pytest.raises(TargetError):
        render_prompt("{input.__class__}", item("x"))


def test_retry_after_reads_seconds_and_http_dates_and_is_capped():
    assert parse_retry_after("2") == 2.0
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0
    assert parse_retry_after("86400") == 60.0
    assert parse_retry_after("soon") is None


def test_statuses_are_classified_by_kind_of_failure():
    assert classify_status(503, "") == ErrorKind.TRANSIENT
    assert classify_status(429, "slow down") == ErrorKind.TRANSIENT
    assert classify_status(429, '{"type": "insufficient_quota"}') == ErrorKind.QUOTA
    assert classify_status(401, "") == ErrorKind.PERMANENT


def test_openai_config_never_stores_a_key():
    with pytest.raises(ConfigError, match="api_key"):
        clean_target_config(
            "openai_chat", {"base_url": "http://x/v1", "model": "m", "api_key": "sk"}
        )


def test_openai_config_names_the_bad_field():
    with pytest.raises(ConfigError, match="base_url"):
        clean_target_config("openai_chat", {"base_url": "ftp://x", "model": "m"})
    with pytest.raises(ConfigError, match="temperature"):
        clean_target_config(
            "openai_chat", {"base_url": "http://x/v1", "model": "m", "temperature": 9}
        )


def test_python_target_refuses_callables_outside_the_allowlist():
    with pytest.raises(ConfigError, match="EVALSITE_PYTHON_TARGETS"):
        clean_target_config("python", {"callable": "os.system"})


async def test_python_target_calls_a_sync_callable():
    target = build_target("python", {"callable": "runs.targets.examples.reverse"})
    assert (await target.generate(item("abc"))).output == "cba"


async def test_python_target_calls_an_async_callable(settings):
    settings.EVALSITE_PYTHON_TARGETS = ["tests.targets.test_targets.shout"]
    target = build_target("python", {"callable": "tests.targets.test_targets.shout"})
    assert (await target.generate(item("hi"))).output == "HI"


async def test_python_target_awaits_an_object_whose_call_is_async(settings):
    settings.EVALSITE_PYTHON_TARGETS = ["tests.targets.test_targets.shouter"]
    target = build_target("python", {"callable": "tests.targets.test_targets.shouter"})
    assert (await target.generate(item("hi"))).output == "HI"


async def test_python_target_exception_is_a_permanent_error(settings):
    settings.EVALSITE_PYTHON_TARGETS = ["tests.targets.test_targets.broken"]
    target = build_target("python", {"callable": "tests.targets.test_targets.broken"})
    with pytest.raises(TargetError, match="ZeroDivisionError") as caught:
        await target.generate(item("x"))
    assert caught.value.kind == ErrorKind.PERMANENT


async def test_demo_target_answers_arithmetic_offline():
    target = build_target(
        "demo",
        {
            "min_latency_ms": 0,
            "max_latency_ms": 0,
            "accuracy": 1,
            "transient_error_rate": 0,
        },
    )
    assert (await target.generate(item("What is 12 * 3?"))).output == "36"


async def shout(item: TargetInput) -> str:
    return str(item.input).upper()


class Shouter:
    async def __call__(self, item: TargetInput) -> str:
        return str(item.input).upper()


shouter = Shouter()


def broken(item: TargetInput) -> str:
    return str(1 / 0)
