"""Parameters that mean the same are declared once: the same bounds and help
wherever they appear, and one loader for the allowlisted-callable plug-ins."""

from __future__ import annotations

import re

import pytest
from django.test import override_settings
from pydantic import ValidationError

from runs.calls.chat_client import EndpointParams
from runs.errors import ConfigError
from runs.executor.options import RunOptions
from runs.plugins import Param, Params, describe
from runs.scorers.f1 import tokens
from runs.scorers.llm_judge import LLMJudgeParams
from runs.scorers.python import PythonScorer
from runs.scorers.text import slices
from runs.targets.http import HttpParams
from runs.targets.python import PythonTarget
from runs.targets.scorer import ScorerTargetParams


def _params(model: type) -> dict[str, Param]:
    return {param.name: param for param in describe(model)}


@pytest.mark.parametrize("name", ["backoff_base_seconds", "backoff_max_seconds"])
def test_run_options_and_the_judge_declare_the_back_off_alike(name: str) -> None:
    option, judge = _params(RunOptions)[name], _params(LLMJudgeParams)[name]
    assert (option.label, option.help) == (judge.label, judge.help)
    assert (option.minimum, option.maximum) == (judge.minimum, judge.maximum)
    assert option.help  # the cap's help is said once, for both


@pytest.mark.parametrize(
    ("model", "name", "config"),
    [
        (EndpointParams, "api_key_secret", {"base_url": "http://x", "model": "m"}),
        (EndpointParams, "api_key_env", {"base_url": "http://x", "model": "m"}),
        (HttpParams, "auth_secret", {"url": "http://x"}),
        (HttpParams, "auth_env", {"url": "http://x"}),
    ],
)
def test_names_of_secrets_and_variables_are_bounded_alike(
    model: type[Params], name: str, config: dict[str, str]
) -> None:
    with pytest.raises(ValidationError) as caught:
        model.model_validate(config | {name: "A" * 101})
    assert [e["type"] for e in caught.value.errors()] == ["string_too_long"]
    assert caught.value.errors()[0]["ctx"] == {"max_length": 100}


@pytest.mark.parametrize("name", ["input_key", "expected_key"])
def test_the_scorer_target_keys_refuse_empty_and_long_names(name: str) -> None:
    config = {"scorer": "llm_judge"}
    for bad in ("", "k" * 101):
        with pytest.raises(ValueError):
            ScorerTargetParams.model_validate(config | {name: bad})


@override_settings(
    EVALSITE_PYTHON_TARGETS=["runs.nowhere.fn"],
    EVALSITE_PYTHON_SCORERS=["runs.nowhere.fn"],
)
def test_both_python_kinds_say_the_same_of_a_callable_that_cannot_load() -> None:
    config = {"callable": "runs.nowhere.fn"}
    with pytest.raises(ConfigError) as target:
        PythonTarget.from_config(config)
    with pytest.raises(ConfigError) as scorer:
        PythonScorer("p", PythonScorer.parse(config))
    assert target.value.field == scorer.value.field == "callable"
    assert str(target.value) == str(scorer.value)


def test_slices_cut_before_the_boundary_they_are_given() -> None:
    text = "alpha beta gamma delta " * 10
    pieces = list(slices(text, 8, re.compile(r"\s")))
    assert "".join(pieces) == text
    assert all(piece[:1] == " " for piece in pieces[1:])
    assert tokens(text) == tokens(" ".join(text.split()))
