"""The plug-in core: one registry, plug-ins built with their Params, declared
hooks, and the layers it keeps (the executor and the secrets store see only it)."""

from __future__ import annotations

import ast
import asyncio
from pathlib import Path
from typing import Any, ClassVar

import pytest
from django.core.exceptions import ImproperlyConfigured

from runs.calls.limits import AdaptiveConcurrency, RetryBudget
from runs.calls.retry import GaveUp, RetryPolicy, with_retries
from runs.errors import ConfigError
from runs.executor.items import ItemRunner, Limits
from runs.executor.options import RunOptions
from runs.executor.shared_limits import Pacing
from runs.models import ErrorKind
from runs.plugins import Params, Plugin, Registry, TargetContext
from runs.plugins.scorers import SCORERS, ScorerPlugin, build_scorer
from runs.plugins.targets import (
    TARGETS,
    TargetError,
    TargetInput,
    TargetOutput,
    TargetPlugin,
    build_target,
)
from runs.scorers.choice import Choice, ChoiceParams
from runs.scorers.includes import Includes, IncludesParams
from runs.scorers.llm_judge import LLMJudge

ROOT = Path(__file__).resolve().parent.parent
SECRETS = TargetContext(secrets={"api_key": "k", "auth": "k"})
# The target kinds whose example builds without a database.
STANDALONE_TARGETS = ["demo", "http", "openai_chat", "replay"]
PLUGIN_MODULES = [
    *(ROOT / "runs" / "scorers").glob("*.py"),
    *(ROOT / "runs" / "calls").glob("*.py"),
    *(
        ROOT / "runs" / "targets" / name
        for name in [
            "base.py",
            "chain.py",
            "demo.py",
            "examples.py",
            "http.py",
            "openai_chat.py",
            "python.py",
            "replay.py",
            "scorer.py",
            "templating.py",
            "trial.py",
            "__init__.py",
        ]
    ),
]


def item(**fields: Any) -> TargetInput:
    return TargetInput(index=0, external_id="a", input="q", **fields)


def imported_modules(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


# -- one registry ----------------------------------------------------------------


def test_targets_and_scorers_share_one_registry_type() -> None:
    assert isinstance(TARGETS, Registry) and isinstance(SCORERS, Registry)
    assert TARGETS.lookup("demo") is TARGETS["demo"]
    with pytest.raises(ConfigError, match="unknown scorer 'nope'") as caught:
        SCORERS.lookup("nope", field="scorers[0].kind")
    assert caught.value.field == "scorers[0].kind"


def test_a_registry_refuses_a_class_that_does_not_declare_itself() -> None:
    registry: Registry[type[Plugin]] = Registry("tool", Plugin, "call")

    class Bare:
        kind = "bare"

        def call(self) -> None: ...

    with pytest.raises(ImproperlyConfigured, match="does not declare label"):
        registry.register(Bare)
    assert "bare" not in registry


# -- plug-ins get their validated Params -------------------------------------------


@pytest.mark.parametrize("kind", sorted(SCORERS))
def test_a_scorer_is_built_with_its_params_instance(kind: str) -> None:
    cls = SCORERS[kind]
    spec = {"name": kind, "kind": kind, "params": cls.example}
    scorer = build_scorer(spec, context=SECRETS)
    assert isinstance(scorer.params, cls.Params)  # type: ignore[attr-defined]


@pytest.mark.parametrize("kind", STANDALONE_TARGETS)
async def test_a_target_is_built_with_its_params_instance(kind: str) -> None:
    cls = TARGETS[kind]
    target = build_target(kind, cls.example, context=SECRETS)
    try:
        assert isinstance(target.params, cls.Params)  # type: ignore[attr-defined]
    finally:
        await target.aclose()


def test_includes_reads_its_declared_default() -> None:
    scorer = Includes("includes", IncludesParams())
    outcome = scorer.score(output="it is 421", item=item(expected="42"))
    assert outcome.passed is False  # whole words, as declared


def test_choice_reads_its_declared_options_field() -> None:
    scorer = Choice("choice", ChoiceParams())
    metadata = {"choices": ["red", "blue"]}
    outcome = scorer.score(output="B", item=item(expected="blue", metadata=metadata))
    assert outcome.passed is True


def test_params_still_read_as_a_mapping_for_older_plugins() -> None:
    params = IncludesParams(ignore_case=True)
    assert params["ignore_case"] is True
    assert params.get("whole_words") is True
    assert "strip" in params


# -- declared hooks -----------------------------------------------------------------


def test_every_built_in_kind_subclasses_its_role_base() -> None:
    assert all(issubclass(cls, TargetPlugin) for cls in TARGETS.values())
    assert all(issubclass(cls, ScorerPlugin) for cls in SCORERS.values())


def test_a_kind_declares_its_params_by_subscripting_its_base() -> None:
    class LoudParams(Params):
        volume: int = 3

    class Loud(ScorerPlugin[LoudParams]):
        kind: ClassVar[str] = "loud_core_test"
        label: ClassVar[str] = "Loud"

    class Quiet(TargetPlugin[LoudParams]):
        kind: ClassVar[str] = "quiet_core_test"
        label: ClassVar[str] = "Quiet"

    assert Loud.Params is LoudParams
    assert Quiet.Params is LoudParams
    assert Loud.clean({}) == {"volume": 3}


def test_a_kind_that_sets_params_keeps_them() -> None:
    class WideParams(IncludesParams):
        width: int = 1

    class Wide(ScorerPlugin[IncludesParams]):
        kind: ClassVar[str] = "wide_core_test"
        label: ClassVar[str] = "Wide"
        Params = WideParams

    assert Wide.Params is WideParams


async def test_a_target_written_against_plugin_alone_gets_the_declared_hooks() -> None:
    class EchoParams(Params):
        pass

    class Echo(Plugin):
        kind: ClassVar[str] = "echo_core_test"
        label: ClassVar[str] = "Echo"
        Params = EchoParams

        @classmethod
        def from_config(cls, config: dict[str, Any]) -> Echo:
            return cls()

        async def generate(self, item: TargetInput) -> TargetOutput:
            return TargetOutput(output=item.input)

    saved = dict(TARGETS)
    try:
        assert TARGETS.register(Echo) is Echo
        config, parent = TARGETS["echo_core_test"].prepare_for_run(
            {"a": 1},
            project=None,
            dataset=None,
            path="target_config",  # type: ignore[arg-type]  # not read by the default
        )
        assert (config, parent) == ({"a": 1}, None)
        target = build_target("echo_core_test", {})
        await target.prepare()
        assert (await target.generate(item())).output == "q"
        await target.aclose()
    finally:
        TARGETS.clear()
        TARGETS.update(saved)


async def test_a_scorer_without_a_limit_takes_its_turn_at_once() -> None:
    scorer = build_scorer({"name": "e", "kind": "exact_match", "params": {}})
    async with scorer.turn():
        pass
    await scorer.prepare()
    await scorer.aclose()


# -- layers --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        *(ROOT / "runs" / "executor").glob("*.py"),
        *(ROOT / "runs" / "secrets").glob("*.py"),
        *(ROOT / "runs" / "plugins").glob("*.py"),
    ],
    ids=lambda path: str(path.relative_to(ROOT)),
)
def test_the_executor_secrets_and_core_import_no_plugin_package(path: Path) -> None:
    found = {
        name
        for name in imported_modules(path)
        if name.split(".")[:2] in (["runs", "targets"], ["runs", "scorers"])
        or name in ("runs.targets", "runs.scorers")
    }
    assert found == set()


@pytest.mark.parametrize(
    "path", PLUGIN_MODULES, ids=lambda path: str(path.relative_to(ROOT))
)
def test_no_plugin_imports_the_executor(path: Path) -> None:
    assert not any(name.startswith("runs.executor") for name in imported_modules(path))


# -- one owner of a runner's limits (no Pacing.fit) --------------------------------


def test_the_runner_uses_the_limits_it_is_given() -> None:
    options = RunOptions()
    given = Limits(
        concurrency=AdaptiveConcurrency(3),
        rate=None,
        budget=RetryBudget(options.retry_budget),
    )
    runner = ItemRunner(target=None, scorers=[], options=options, limits=given)  # type: ignore[arg-type]
    assert runner.concurrency is given.concurrency
    assert runner.budget is given.budget
    assert not hasattr(Pacing, "fit")


# -- one call policy -------------------------------------------------------------


def test_the_judge_and_the_runner_use_the_same_call_policy() -> None:
    judge = LLMJudge.parse(
        {"base_url": "http://127.0.0.1:9/v1", "model": "m", "max_attempts": 5}
    )
    assert isinstance(LLMJudge("j", judge).retry_policy, RetryPolicy)
    runner = ItemRunner(target=None, scorers=[], options=RunOptions())  # type: ignore[arg-type]
    assert isinstance(runner.retry_policy, RetryPolicy)


async def test_with_retries_tries_transient_failures_again_and_stops_on_others() -> (
    None
):
    policy = RetryPolicy(max_attempts=3, timeout=5)
    calls: list[ErrorKind] = []

    def failing(kinds: list[ErrorKind]) -> Any:
        async def call() -> str:
            kind = kinds[len(calls)]
            calls.append(kind)
            if kind is ErrorKind.PERMANENT and len(calls) == len(kinds):
                return "ok"
            raise TargetError("no", kind=kind, retry_after=0)

        return call

    def timed_out(seconds: float) -> TargetError:
        return TargetError("slow", kind=ErrorKind.TIMEOUT)

    answer = await with_retries(
        failing([ErrorKind.TRANSIENT, ErrorKind.TRANSIENT, ErrorKind.PERMANENT]),
        policy=policy,
        failures=TargetError,
        timed_out=timed_out,
    )
    assert answer == "ok"
    calls.clear()
    with pytest.raises(GaveUp) as caught:
        await with_retries(
            failing([ErrorKind.QUOTA, ErrorKind.PERMANENT]),
            policy=policy,
            failures=TargetError,
            timed_out=timed_out,
        )
    assert caught.value.attempts == 1
    assert caught.value.failure.kind is ErrorKind.QUOTA


async def test_with_retries_turns_a_timeout_into_a_failure() -> None:
    policy = RetryPolicy(max_attempts=1, timeout=0.01)

    async def hangs() -> None:
        await asyncio.Event().wait()

    with pytest.raises(GaveUp) as caught:
        await with_retries(
            hangs,
            policy=policy,
            failures=TargetError,
            timed_out=lambda s: TargetError(f"over {s:g} s", kind=ErrorKind.TIMEOUT),
        )
    assert caught.value.failure.message == "over 0.01 s"
