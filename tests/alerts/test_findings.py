"""What a finished run's alert says: worse verdicts, floors, a failed run."""

from __future__ import annotations

import pytest

from runs.alerts.delivery import scrubbed
from runs.alerts.findings import BELOW_FLOOR, RUN_FAILED, findings
from runs.errors import InvalidInput
from runs.models import Run, RunStatus
from tests.comparisons import paired_runs
from tests.factories import arithmetic_items, make_dataset


def test_a_better_run_has_no_finding(dataset):
    baseline, candidate = paired_runs(
        dataset, both_passed=0, regressions=0, improvements=10, both_failed=0
    )
    assert findings(candidate, baseline, None) == []


def test_a_pass_rate_below_its_floor_is_a_finding(dataset):
    # 6 of 10 passed: below a floor of 0.7, not below one of 0.6.
    baseline, candidate = paired_runs(
        dataset, both_passed=6, regressions=0, improvements=0, both_failed=4
    )
    (found,) = findings(candidate, baseline, {"exact_match": 0.7})
    assert (found.kind, found.scorer, found.pass_rate, found.floor) == (
        BELOW_FLOOR,
        "exact_match",
        0.6,
        0.7,
    )
    assert findings(candidate, baseline, {"exact_match": 0.6}) == []
    assert findings(candidate, None, {"absent": 0.9}) == []


def test_a_failed_run_is_a_finding(dataset):
    _, candidate = paired_runs(
        dataset, both_passed=5, regressions=0, improvements=0, both_failed=5
    )
    Run.objects.filter(pk=candidate.pk).update(
        status=RunStatus.FAILED, error="storage unavailable"
    )
    candidate.refresh_from_db()
    (found,) = findings(candidate, None, None)
    assert found.kind == RUN_FAILED and "storage unavailable" in found.message


def test_a_baseline_of_another_project_is_refused(dataset, other_project):
    _, candidate = paired_runs(
        dataset, both_passed=1, regressions=0, improvements=0, both_failed=0
    )
    elsewhere = make_dataset(other_project, arithmetic_items(10))
    foreign, _ = paired_runs(
        elsewhere, both_passed=1, regressions=0, improvements=0, both_failed=0
    )
    with pytest.raises(InvalidInput) as refused:
        findings(candidate, foreign, None)
    assert refused.value.field == "baseline"


@pytest.mark.parametrize("floor", [1.5, -0.1, "high", True])
def test_a_bad_floor_is_named(dataset, floor):
    _, candidate = paired_runs(
        dataset, both_passed=1, regressions=0, improvements=0, both_failed=0
    )
    with pytest.raises(InvalidInput) as refused:
        findings(candidate, None, {"exact_match": floor})
    assert refused.value.field == "floors.exact_match"


def test_an_error_never_shows_a_url_path():
    url = "https://hooks.slack.com/services/T0/B0/token"
    text = f"InvalidURL: {url} is not valid"
    assert scrubbed(text, url) == "InvalidURL: https://hooks.slack.com is not valid"
