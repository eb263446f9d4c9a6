from __future__ import annotations

import asyncio

import pytest

from runs.errors import ConfigError
from runs.plugins.scoring import ScorerCall, runs_on_loop
from runs.sandbox import Limits, Program, run_program
from runs.scorers import build_scorer, clean_scorer_specs
from tests.sandboxes import (  # noqa: F401  (fixtures)
    CORRECT,
    PROMPT,
    bubblewrap,
    humaneval_items,
    item,
    limits_only,
    sandbox_processes,
    score,
)

pytestmark = pytest.mark.usefixtures("bubblewrap")


async def test_a_correct_completion_passes():
    outcome = await score(CORRECT)
    assert (outcome.passed, outcome.value) == (True, 1.0)
    assert outcome.reason == "check(add) passed"


async def test_a_wrong_completion_fails_with_the_assertion():
    outcome = await score("    return a - b\n")
    assert (outcome.passed, outcome.value) == (False, 0.0)
    assert "exit status 1" in outcome.reason
    assert "assert candidate(1, 2) == 3" in outcome.reason
    assert "AssertionError" in outcome.reason


async def test_the_assertion_message_is_in_the_reason():
    outcome = await score("    return abs(a) + b\n")
    assert outcome.passed is False
    assert "AssertionError: negative numbers" in outcome.reason


async def test_the_scorer_waits_on_the_loop_and_runs_the_program_elsewhere():
    spec = clean_scorer_specs(["code_exec"])[0]
    scorer = build_scorer(spec)
    assert runs_on_loop(scorer)
    outcome = await ScorerCall(scorer, CORRECT, item()).run()
    assert outcome.passed is True


async def test_an_empty_completion_fails():
    outcome = await score("")
    assert outcome.passed is False
    assert "AssertionError" in outcome.reason


async def test_none_as_output_is_an_empty_completion():
    assert (await score(None)).passed is False


async def test_unicode_in_prompt_completion_and_tests():
    target = item(
        prompt='def greet(name):\n    """Grüße, ✓."""\n',
        test="def check(candidate):\n    assert candidate('Zoë') == 'héllo Zoë ✓'\n",
        entry_point="greet",
    )
    outcome = await score("    return f'héllo {name} ✓'\n", target)
    assert outcome.passed is True, outcome.reason


async def test_a_huge_completion_runs_whole():
    filler = "    # " + "x" * 70 + "\n"
    completion = filler * 30_000 + CORRECT  # over 2 MB
    outcome = await score(completion)
    assert outcome.passed is True, outcome.reason


async def test_invalid_python_fails_with_the_syntax_error():
    outcome = await score("    return a +* b\n")
    assert outcome.passed is False
    assert "SyntaxError" in outcome.reason


async def test_an_entry_point_the_completion_does_not_define_fails_naming_it():
    outcome = await score(CORRECT, item(entry_point="subtract"))
    assert outcome.passed is False
    assert "NameError: name 'subtract' is not defined" in outcome.reason


async def test_an_iterator_comes_back_as_an_iterator_over_its_values():
    target = item(
        prompt="def evens(n):\n",
        test=(
            "def check(candidate):\n"
            "    result = candidate(5)\n"
            "    assert result != [0, 2, 4]\n"
            "    assert list(result) == [0, 2, 4]\n"
        ),
        entry_point="evens",
    )
    outcome = await score("    return (i for i in range(n) if i % 2 == 0)\n", target)
    assert outcome.passed is True, outcome.reason


async def test_field_names_are_parameters():
    target = item()
    target.metadata["tests_v2"] = target.metadata.pop("test")
    target.metadata["fn"] = target.metadata.pop("entry_point")
    outcome = await score(
        CORRECT, target, test_field="tests_v2", entry_point_field="fn"
    )
    assert outcome.passed is True


async def test_the_input_can_be_left_out():
    completion = PROMPT + CORRECT
    assert (await score(completion, include_input=False)).passed is True


async def test_an_item_without_tests_is_a_scorer_error_naming_the_field():
    target = item()
    del target.metadata["test"]
    with pytest.raises(ValueError, match="no 'test'"):
        await score(CORRECT, target)


async def test_an_entry_point_that_is_not_a_name_is_a_scorer_error():
    with pytest.raises(ValueError, match="not a Python name"):
        await score(CORRECT, item(entry_point="add); import os; os._exit(0"))


def test_bad_limits_are_refused_naming_the_parameter():
    with pytest.raises(ConfigError) as caught:
        clean_scorer_specs([{"kind": "code_exec", "params": {"memory_mb": 1}}])
    assert caught.value.field == "scorers[0].params.memory_mb"


@pytest.mark.parametrize(
    ("param", "value", "setting"),
    [
        ("memory_mb", 4096, "EVALSITE_SANDBOX_MAX_MEMORY_MB"),
        ("processes", 1024, "EVALSITE_SANDBOX_MAX_PROCESSES"),
        ("timeout_seconds", 300, "EVALSITE_SANDBOX_MAX_SECONDS"),
        ("cpu_seconds", 600, "EVALSITE_SANDBOX_MAX_SECONDS"),
        ("file_size_mb", 1024, "EVALSITE_SANDBOX_MAX_FILE_SIZE_MB"),
        ("open_files", 4096, "EVALSITE_SANDBOX_MAX_OPEN_FILES"),
        ("max_output_kb", 10240, "EVALSITE_SANDBOX_MAX_OUTPUT_KB"),
    ],
)
def test_limits_above_the_operators_ceiling_are_refused_naming_the_parameter(
    param, value, setting
):
    specs = [
        "exact_match",
        {"kind": "code_exec", "params": {param: value}},
    ]
    with pytest.raises(ConfigError) as caught:
        clean_scorer_specs(specs)
    assert caught.value.field == f"scorers[1].params.{param}"
    assert setting in caught.value.message


def test_the_ceilings_are_settings(settings):
    settings.EVALSITE_SANDBOX_MAX_MEMORY_MB = 256
    with pytest.raises(ConfigError, match="at most 256"):
        clean_scorer_specs([{"kind": "code_exec", "params": {"memory_mb": 512}}])
    settings.EVALSITE_SANDBOX_MAX_MEMORY_MB = 8192
    spec = clean_scorer_specs([{"kind": "code_exec", "params": {"memory_mb": 4096}}])
    assert spec[0]["params"]["memory_mb"] == 4096


@pytest.mark.django_db
def test_the_api_refuses_a_run_above_a_ceiling_naming_the_field(alice_client, dataset):
    from runs.models import Run
    from tests.test_api_runs import post_run

    scorers = [{"kind": "code_exec", "params": {"memory_mb": 16384}}]
    response = post_run(alice_client, dataset, scorers=scorers)
    assert response.status_code == 400
    assert response.json()["field"] == "scorers[0].params.memory_mb"
    assert "EVALSITE_SANDBOX_MAX_MEMORY_MB" in response.json()["detail"]
    assert not Run.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_evalrun_refuses_a_scorer_above_a_ceiling_naming_the_field(alice, tmp_path):
    from django.core.management import CommandError

    from runs.models import Run
    from tests.test_evalrun_scorer_json import evalrun, write_items

    dataset = write_items(tmp_path / "items.jsonl")
    with pytest.raises(CommandError) as caught:
        evalrun(dataset, 'code_exec:{"processes": 512}')
    assert "'scorers[0].params.processes'" in str(caught.value)
    assert "EVALSITE_SANDBOX_MAX_PROCESSES" in str(caught.value)
    assert not Run.objects.exists()


async def test_the_sandbox_holds_any_limits_to_the_ceilings(settings):
    settings.EVALSITE_SANDBOX_MAX_SECONDS = 1
    program = Program(
        candidate="import time\ntime.sleep(20)\n",
        tests="def check(candidate):\n    pass\n",
        entry_point="f",
    )
    outcome = await run_program(program, Limits(wall_seconds=30, cpu_seconds=30))
    assert outcome.timed_out is True
    assert outcome.describe() == "timed out after 1 s (wall time); killed"


def test_code_exec_does_not_need_an_expected_answer():
    from runs.scorers import REGISTRY

    assert REGISTRY["code_exec"].requires_expected({}) is False


@pytest.mark.no_database
async def test_humaneval_canonical_solutions_pass_and_pass_bodies_fail():
    """Acceptance: 164 of 164 canonical solutions, 0 of 164 bodies of ``pass``."""
    items = humaneval_items()
    spec = clean_scorer_specs(["code_exec"])[0]
    scorer = build_scorer(spec)

    async def both(target):
        good = await scorer.score(output=target.expected, item=target)
        empty = await scorer.score(output="    pass\n", item=target)
        return good, empty

    # The sandbox's own pool bounds how many programs run at once.
    outcomes = await asyncio.gather(*(both(target) for target in items))
    failed = [
        (target.external_id, good.reason)
        for target, (good, _) in zip(items, outcomes, strict=True)
        if not good.passed
    ]
    assert len(items) == 164
    assert failed == []
    assert sum(empty.passed for _, empty in outcomes) == 0
    assert sandbox_processes() == []


# -- a chat model's answer ----------------------------------------------------

CHAT_ANSWER = (
    "Here is the function:\n\n"
    "```python\n"
    "def add(a, b):\n"
    '    """Return the sum of a and b."""\n'
    "    return a + b\n"
    "```\n\n"
    "It adds the two numbers.\n"
)
# A prompt with an import and a helper the restated function needs.
HELPER_PROMPT = (
    "from typing import List\n\n\n"
    "def twice(x: int) -> int:\n"
    "    return 2 * x\n\n\n"
    "def doubled(xs: List[int]) -> List[int]:\n"
    '    """Each number, twice."""\n'
)
HELPER_TEST = "def check(candidate):\n    assert candidate([1, 2]) == [2, 4]\n"


async def test_a_fenced_python_answer_is_read_from_its_block():
    outcome = await score(CHAT_ANSWER)
    assert outcome.passed is True, outcome.reason


async def test_a_bare_fence_is_read_too():
    answer = "Sure.\n```\n    return a + b\n```\n"
    outcome = await score(answer)
    assert outcome.passed is True, outcome.reason


async def test_a_bare_completion_runs_after_the_prompt_as_before():
    outcome = await score(CORRECT)
    assert outcome.passed is True, outcome.reason


async def test_the_first_python_block_counts_before_a_bare_one():
    answer = "```\nprint('usage')\n```\n" + CHAT_ANSWER + "```python\nadd = 0\n```\n"
    outcome = await score(answer)
    assert outcome.passed is True, outcome.reason


async def test_a_restated_function_is_defined_once_with_the_prompts_helpers():
    completion = (
        "def doubled(xs: List[int]) -> List[int]:\n    return [twice(x) for x in xs]\n"
    )
    target = item(prompt=HELPER_PROMPT, test=HELPER_TEST, entry_point="doubled")
    scorer = build_scorer(clean_scorer_specs(["code_exec"])[0])
    program = scorer.program(output=f"```python\n{completion}```", item=target)
    assert program.candidate.count("def doubled(") == 1
    assert "from typing import List" in program.candidate
    assert "def twice(" in program.candidate
    outcome = await scorer.score(output=completion, item=target)
    assert outcome.passed is True, outcome.reason


async def test_extract_code_none_runs_the_output_as_it_is():
    outcome = await score(CHAT_ANSWER, extract_code="none")
    assert outcome.passed is False
    assert outcome.reason.startswith("SyntaxError while loading the completion\n")


async def test_extract_code_fenced_fails_an_answer_without_a_block():
    outcome = await score(CORRECT, extract_code="fenced")
    assert (outcome.passed, outcome.reason) == (
        False,
        "no fenced code block in the output",
    )
    assert (await score(CHAT_ANSWER, extract_code="fenced")).passed is True


def test_extract_code_is_declared_with_the_other_parameters():
    from runs.plugins import json_schema
    from runs.scorers import REGISTRY

    schema = json_schema(REGISTRY["code_exec"].Params)
    assert list(schema["properties"]) == [
        "test_field",
        "entry_point_field",
        "include_input",
        "extract_code",
        "timeout_seconds",
        "cpu_seconds",
        "memory_mb",
        "processes",
        "file_size_mb",
        "open_files",
        "max_output_kb",
    ]
    assert schema["properties"]["extract_code"]["enum"] == ["auto", "fenced", "none"]
    assert schema["properties"]["extract_code"]["default"] == "auto"
    with pytest.raises(ConfigError) as caught:
        clean_scorer_specs([{"kind": "code_exec", "params": {"extract_code": "x"}}])
    assert caught.value.field == "scorers[0].params.extract_code"


# -- the reason's first line: the kind of failure -------------------------------


@pytest.mark.parametrize(
    ("completion", "headline"),
    [
        ("    return a - b\n", "AssertionError in the tests"),
        ("    return a +* b\n", "SyntaxError while loading the completion"),
        ("    return c\n", "NameError raised by the candidate"),
        ("    return [a][5]\n", "IndexError raised by the candidate"),
        ("    raise SystemExit(3)\n", "exit status 3"),
    ],
)
async def test_the_reasons_first_line_names_the_kind_of_failure(completion, headline):
    outcome = await score(completion)
    assert outcome.passed is False
    assert outcome.reason.partition("\n")[0] == headline
