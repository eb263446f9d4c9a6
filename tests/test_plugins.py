"""One declaration per plug-in: validation, forms, flags and schemas derive from it."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from runs.errors import ConfigError
from runs.executor.options import RunOptions, option_params
from runs.management.commands.evalrun import Command
from runs.management.evalrun_cli import run_options, target_config
from runs.models import Project
from runs.plugins import describe, json_schema
from runs.results.forms import RunForm
from runs.scorers import REGISTRY as SCORERS
from runs.scorers import clean_scorer_specs
from runs.targets import REGISTRY as TARGETS
from runs.targets import clean_target_config
from runs.targets.forms import TargetForm

API = "/api/v1"
BUILT_IN_TARGETS = {"demo", "openai_chat", "python"}
BUILT_IN_SCORERS = {
    "exact_match",
    "includes",
    "numeric",
    "regex",
    "choice",
    "f1",
    "similarity",
    "json",
    "math",
    "python",
}


def parse(*args: str) -> dict[str, Any]:
    parser = Command().create_parser("manage.py", "evalrun")
    return vars(parser.parse_args(["data.jsonl", *args]))


# -- declarations ------------------------------------------------------------------


@pytest.mark.parametrize("kind", sorted(BUILT_IN_TARGETS))
def test_each_target_example_is_valid_for_its_own_declaration(kind: str) -> None:
    cls = TARGETS[kind]

    cleaned = clean_target_config(kind, cls.example)

    assert cls.example and cls.summary() and cls.label
    assert set(cleaned) <= {p.name for p in describe(cls.Params)}


@pytest.mark.parametrize("kind", sorted(BUILT_IN_SCORERS))
def test_each_scorer_example_is_valid_for_its_own_declaration(kind: str) -> None:
    spec = clean_scorer_specs([{"kind": kind, "params": SCORERS[kind].example}])[0]

    assert spec["params"] == SCORERS[kind].clean(SCORERS[kind].example)
    assert SCORERS[kind].example.items() <= spec["params"].items()


def test_secrets_are_declared_parameters_of_their_plugin() -> None:
    for cls in [*TARGETS.values(), *SCORERS.values()]:
        assert set(cls.secret_params()) <= {p.name for p in describe(cls.Params)}
    assert set(TARGETS["openai_chat"].secret_params()) == {
        "api_key_secret",
        "api_key_env",
    }


def test_openai_chat_has_the_declared_config_keys() -> None:
    names = [p.name for p in describe(TARGETS["openai_chat"].Params)]

    assert names == [
        "base_url",
        "model",
        "api_key_secret",
        "api_key_env",
        "system_prompt",
        "prompt_template",
        "temperature",
        "max_tokens",
        "extra_body",
        "response_format",
        "tools",
        "tool_choice",
        "keep_raw_response",
    ]


# -- validation --------------------------------------------------------------------


def test_validation_names_the_whole_path_of_the_field() -> None:
    with pytest.raises(ConfigError) as caught:
        clean_target_config(
            "openai_chat",
            {"base_url": "http://x/v1", "model": "m", "max_tokens": 0},
            path="target_config",
        )

    assert caught.value.field == "target_config.max_tokens"
    assert "must be between 1 and 10000000, not 0" in str(caught.value)


def test_unknown_parameter_is_refused_naming_it() -> None:
    with pytest.raises(ConfigError) as caught:
        clean_scorer_specs([{"kind": "numeric", "params": {"tolerance": 1}}])

    assert caught.value.field == "scorers[0].params.tolerance"
    assert "is not a parameter of numeric" in str(caught.value)


def test_run_option_error_names_the_option() -> None:
    with pytest.raises(ConfigError) as caught:
        RunOptions.from_dict({"epochs": 101}, path="options")

    assert caught.value.field == "options.epochs"
    assert "must be between 1 and 100" in str(caught.value)


def test_a_flag_is_not_a_number() -> None:
    with pytest.raises(ConfigError, match="must be a whole number, not True"):
        RunOptions.from_dict({"concurrency": True})


def test_none_takes_the_default() -> None:
    assert RunOptions.from_dict({"concurrency": None, "epochs": ""}) == RunOptions()
    assert TARGETS["demo"].clean({"accuracy": None})["accuracy"] == 0.8


# -- form fields -------------------------------------------------------------------


def test_run_form_has_a_field_per_scorer_parameter_and_run_option(
    db: None, bob: Any
) -> None:
    form = RunForm(user=bob)

    for kind, cls in SCORERS.items():
        for param in describe(cls.Params):
            assert f"{kind}__{param.name}" in form.fields
    assert {p.name for p in option_params()} <= set(form.fields)
    assert len(option_params()) == 15
    extract = form.fields["numeric__extract"]
    assert [value for value, _ in extract.choices] == ["last", "first", "only"]
    assert form.fields["numeric__abs_tol"].widget.attrs["min"] == "0"
    assert form.fields["exact_match__strip"].initial is True
    assert form.fields["concurrency"].widget.attrs["max"] == "1024"


def test_target_form_field_types_follow_the_declaration(db: None, bob: Any) -> None:
    form = TargetForm(user=bob)

    assert form.fields["demo__accuracy"].widget.attrs == {
        "step": "any",
        "min": "0",
        "max": "1",
        "placeholder": "e.g. 0.8",
    }
    assert form.fields["openai_chat__max_tokens"].widget.attrs["step"] == "1"
    assert form.fields["openai_chat__prompt_template"].initial == "{input}"
    assert type(form.fields["openai_chat__extra_body"]).__name__ == "JSONTextField"
    assert "config" not in form.fields


# -- command-line flags ------------------------------------------------------------


def test_every_run_option_has_a_flag() -> None:
    parser = Command().create_parser("manage.py", "evalrun")
    flags = {flag for action in parser._actions for flag in action.option_strings}

    for flag in (
        "--concurrency",
        "--timeout",
        "--max-attempts",
        "--epochs",
        "--deadline",
        "--retry-budget",
        "--rate-limit-rpm",
        "--no-adaptive-concurrency",
        "--fail-fast",
        "--fail-fast-min-items",
        "--scorer-timeout-seconds",
        "--backoff-base-seconds",
        "--backoff-max-seconds",
        "--storage-timeout-seconds",
    ):
        assert flag in flags


def test_option_flags_become_run_options() -> None:
    opts = parse("--timeout", "5", "--no-adaptive-concurrency", "--fail-fast", "0.5")

    assert run_options(opts) == {
        "timeout_seconds": 5.0,
        "adaptive_concurrency": False,
        "fail_fast_error_rate": 0.5,
    }


def test_target_flags_override_target_config() -> None:
    opts = parse(
        "--target-config",
        '{"base_url": "http://x/v1", "model": "a", "temperature": 1}',
        "--model",
        "b",
        "--max-tokens",
        "9",
    )

    assert target_config(opts) == {
        "base_url": "http://x/v1",
        "model": "b",
        "temperature": 1,
        "max_tokens": 9,
    }


def test_a_flag_of_another_target_kind_is_refused() -> None:
    opts = parse("--target", "demo", "--callable", "runs.targets.examples.echo")

    with pytest.raises(Exception, match="--callable is not a parameter of target"):
        target_config(opts)


def test_scorer_flag_takes_kind_json_params_and_a_name() -> None:
    opts = parse(
        "--scorer",
        "exact_match",
        "--scorer",
        'regex:{"pattern": "\\\\d+"}',
        "--scorer",
        'loose=numeric:{"abs_tol": 0.5}',
    )

    assert opts["scorer"] == [
        {"kind": "exact_match"},
        {"kind": "regex", "params": {"pattern": "\\d+"}},
        {"kind": "numeric", "name": "loose", "params": {"abs_tol": 0.5}},
    ]


# -- API schema ----------------------------------------------------------------------


def test_api_schema_documents_every_run_option(alice_client: Client) -> None:
    schema = alice_client.get(f"{API}/openapi.json").json()
    run_in = schema["components"]["schemas"]["RunIn"]

    options = run_in["properties"]["options"]["properties"]
    assert set(options) == {p.name for p in option_params()}
    assert options["concurrency"]["maximum"] == 1024
    kinds = run_in["properties"]["target_config"]["x-parameters-by-kind"]
    assert kinds["demo"] == json_schema(TARGETS["demo"].Params)


def test_api_still_takes_options_as_a_plain_object(
    alice_client: Client, project: Project
) -> None:
    from tests.factories import make_dataset

    dataset = make_dataset(project, [{"id": "a", "input": "1+1", "expected": "2"}])
    response = alice_client.post(
        f"{API}/runs",
        {
            "dataset": dataset.pk,
            "target_kind": "demo",
            "scorers": ["exact_match"],
            "options": {"concurrency": "2", "backoff_max_seconds": 1},
        },
        content_type="application/json",
    )

    assert response.status_code == 201
    assert response.json()["options"]["concurrency"] == 2
