"""Failures of one kind form one cluster, whatever the items they are about."""

from __future__ import annotations

from collections import Counter

import pytest

from runs.analysis.clusters import run_clusters
from runs.models import Project
from runs.records.signatures import score_signature
from tests.analysis.realistic_failures import MATH_ANSWERS, humaneval_failures
from tests.factories import arithmetic_items, echo_run, make_dataset, store_outcomes
from tests.scorers.scoring import score


def _patterns(reasons: list[str]) -> Counter[str]:
    found = (score_signature(passed=False, reason=r, error="") for r in reasons)
    return Counter(signature.pattern for signature in found if signature)


@pytest.mark.django_db
def test_humaneval_failures_form_one_cluster_per_kind(project: Project) -> None:
    reasons = humaneval_failures()
    dataset = make_dataset(project, arithmetic_items(len(reasons)))
    outcomes = [{"scores": [("code_exec", False, reason)]} for reason in reasons]
    run = store_outcomes(echo_run(dataset), outcomes)

    clusters = run_clusters(run=run)

    assert clusters.failed_score_clusters == 9
    assert clusters.failed_scores[0].pattern == "AssertionError in the tests"
    assert {c.pattern: c.count for c in clusters.failed_scores} == {
        "AssertionError in the tests": 120,
        "timed out after <n> s (wall time); killed": 9,
        "SyntaxError while loading the completion": 8,
        "NameError raised by the candidate": 6,
        "TypeError raised by the candidate": 6,
        "IndexError raised by the candidate": 5,
        "ValueError raised by the candidate": 4,
        "NameError while loading the completion": 3,
        "ZeroDivisionError raised by the candidate": 3,
    }
    # The example keeps the whole reason: the traceback under the headline.
    assert "assert " in clusters.failed_scores[0].example


async def test_math_failures_cluster_by_kind_whatever_the_expressions() -> None:
    outcomes = [await score("math", output, gold) for output, gold in MATH_ANSWERS]
    failing = [outcome.reason for outcome in outcomes if not outcome.passed]

    assert len(failing) == 40
    assert _patterns(failing) == {
        "answer <str> does not equal expected <str>": 36,
        "no answer found in the output; expected <str>": 4,
    }


def test_a_reasons_lines_below_the_first_do_not_split_a_cluster() -> None:
    first = "AssertionError in the tests\nexit status 1: assert f([1]) == 'a'"
    second = "AssertionError in the tests\nexit status 1: assert g(x='b') is None"
    assert len(_patterns([first, second])) == 1
    other = "IndexError raised by the candidate\nexit status 1: assert f([1]) == 'a'"
    assert len(_patterns([first, other])) == 2
