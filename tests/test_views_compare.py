"""The comparison page, and the ways to it: the runs list and a run's page."""

from __future__ import annotations

import cProfile
import pstats
import re

import pytest
from django.core.cache import caches
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from runs.models import Dataset, Project, Run
from runs.records.versions import results_changed
from tests.comparisons import add_result, finish, make_run, paired_runs
from tests.factories import arithmetic_items, make_dataset

pytestmark = pytest.mark.django_db

URL = reverse("runs:compare")


@pytest.fixture
def runs(dataset: Dataset) -> tuple[Run, Run]:
    return paired_runs(
        dataset, both_passed=3, regressions=2, improvements=4, both_failed=1
    )


def _get(client: Client, baseline: Run, *candidates: Run, **extra: str):
    query = {
        "baseline": baseline.pk,
        "candidates": ",".join(str(run.pk) for run in candidates),
        **extra,
    }
    return client.get(URL, query)


def test_page_shows_the_verdict_table(
    victor_client: Client, runs: tuple[Run, Run]
) -> None:
    response = _get(victor_client, *runs)

    assert response.status_code == 200
    page = response.content.decode()
    assert 'id="verdict-table"' in page
    assert "no significant difference" in page
    assert "verdict-none" in page
    [row] = response.context["comparison"].scorers
    assert (row.regressions, row.improvements) == (2, 4)


def test_page_says_how_runs_are_paired_and_what_was_left_out(
    alice_client: Client, runs: tuple[Run, Run]
) -> None:
    page = _get(alice_client, *runs).content.decode()

    assert "(the runs share one dataset version)" in page
    assert 'id="unpaired">0 ' in page


def test_a_significant_improvement_is_coloured_better(
    alice_client: Client, project: Project
) -> None:
    dataset = make_dataset(project, arithmetic_items(40), name="forty")
    baseline, candidate = paired_runs(
        dataset, both_passed=10, regressions=0, improvements=20, both_failed=10
    )

    page = _get(alice_client, baseline, candidate).content.decode()

    assert '<span class="verdict verdict-better">better</span>' in page
    assert "&lt; 0.0001" in page  # 20 improvements, no regression


def test_item_table_filters_to_regressions(
    alice_client: Client, runs: tuple[Run, Run]
) -> None:
    baseline, candidate = runs

    response = _get(alice_client, baseline, candidate, change="regressions")

    rows = list(response.context["page"].object_list)
    assert [row["external_id"] for row in rows] == ["q3", "q4"]
    page = response.content.decode()
    for row in rows:
        for run, result in (
            (baseline, row["baseline_result"]),
            (candidate, row["candidate_result"]),
        ):
            assert reverse("runs:result_detail", args=[run.pk, result]) in page


def test_item_table_is_paginated(alice_client: Client, project: Project) -> None:
    dataset = make_dataset(project, arithmetic_items(60), name="sixty")
    baseline, candidate = paired_runs(
        dataset, both_passed=60, regressions=0, improvements=0, both_failed=0
    )

    second = _get(alice_client, baseline, candidate, page="2")

    assert second.context["page"].paginator.count == 60
    assert [row["external_id"] for row in second.context["page"].object_list] == [
        f"q{i}" for i in range(50, 60)
    ]


def test_an_unknown_change_filter_is_400(
    alice_client: Client, runs: tuple[Run, Run]
) -> None:
    response = _get(alice_client, *runs, change="everything")

    assert response.status_code == 400
    assert "change" in response.content.decode()


def test_missing_candidates_is_400_naming_them(
    alice_client: Client, runs: tuple[Run, Run]
) -> None:
    response = alice_client.get(URL, {"baseline": runs[0].pk})

    assert response.status_code == 400
    assert "candidates" in response.content.decode()


def test_baseline_chooser_links_swap_the_baseline(
    alice_client: Client, runs: tuple[Run, Run]
) -> None:
    baseline, candidate = runs

    page = _get(alice_client, baseline, candidate).content.decode()

    swapped = f"?baseline={candidate.pk}&amp;candidates={baseline.pk}"
    assert swapped in page


def test_ticked_runs_redirect_to_their_comparison_with_the_oldest_as_baseline(
    alice_client: Client, runs: tuple[Run, Run]
) -> None:
    baseline, candidate = runs

    response = alice_client.get(URL, {"run": [candidate.pk, baseline.pk]})

    assert response.status_code == 302
    assert response["Location"] == (
        f"{URL}?baseline={baseline.pk}&candidates={candidate.pk}"
    )


def test_one_ticked_run_is_400(alice_client: Client, runs: tuple[Run, Run]) -> None:
    response = alice_client.get(URL, {"run": [runs[0].pk]})

    assert response.status_code == 400


def test_outsider_gets_404(mallory_client: Client, runs: tuple[Run, Run]) -> None:
    assert _get(mallory_client, *runs).status_code == 404


def test_outsider_gets_404_when_only_the_candidate_is_not_hers(
    mallory_client: Client, other_project: Project, runs: tuple[Run, Run]
) -> None:
    hers = make_run(make_dataset(other_project, arithmetic_items(3)))

    assert _get(mallory_client, hers, runs[1]).status_code == 404


def test_runs_list_rows_have_a_compare_checkbox(
    alice_client: Client, runs: tuple[Run, Run]
) -> None:
    page = alice_client.get(reverse("runs:run_list")).content.decode()

    for run in runs:
        assert (
            f'<input type="checkbox" name="run" value="{run.pk}" form="compare-form"'
            in page
        )
    assert f'action="{URL}" id="compare-form"' in page


def test_run_page_includes_the_compare_section(
    alice_client: Client, runs: tuple[Run, Run]
) -> None:
    page = alice_client.get(
        reverse("runs:run_detail", args=[runs[0].pk])
    ).content.decode()

    choices = reverse("runs:run_compare_choices", args=[runs[0].pk])
    assert page.count('id="compare"') == 1
    assert f'hx-get="{choices}"' in page
    assert page.index('id="compare"') < page.index('id="results"')


def test_compare_choices_list_runs_over_any_version_of_the_dataset(
    alice_client: Client, project: Project, runs: tuple[Run, Run]
) -> None:
    baseline, candidate = runs
    newer = make_dataset(project, arithmetic_items(3), name="arith", version=2)
    later = make_run(newer)
    elsewhere = make_run(make_dataset(project, arithmetic_items(3), name="other"))

    response = alice_client.get(
        reverse("runs:run_compare_choices", args=[baseline.pk]),
        headers={"HX-Request": "true"},
    )

    assert response.status_code == 200
    assert {run.pk for run in response.context["choices"]} == {
        candidate.pk,
        later.pk,
    }
    assert elsewhere.pk not in {run.pk for run in response.context["choices"]}
    assert "<html" not in response.content.decode()


def test_compare_choices_of_a_run_she_cannot_see_are_404(
    mallory_client: Client, runs: tuple[Run, Run]
) -> None:
    url = reverse("runs:run_compare_choices", args=[runs[0].pk])

    assert mallory_client.get(url).status_code == 404


def test_pairs_across_dataset_versions_on_the_page(
    alice_client: Client, project: Project
) -> None:
    v1 = make_dataset(project, arithmetic_items(4), name="qa", version=1)
    v2 = make_dataset(project, arithmetic_items(5), name="qa", version=2)
    baseline, candidate = make_run(v1), make_run(v2)
    for item in v1.items.all():
        add_result(baseline, item, {"exact_match": 1.0})
    for item in v2.items.all():
        add_result(candidate, item, {"exact_match": 1.0})

    page = _get(alice_client, finish(baseline), finish(candidate)).content.decode()

    assert "external id" in page
    assert 'id="unpaired">1 ' in page


def test_runs_without_a_shared_scorer_have_nothing_to_compare(
    alice_client: Client, dataset: Dataset
) -> None:
    baseline = make_run(dataset, scorers=["exact_match"])
    candidate = make_run(dataset, scorers=["includes"])

    response = _get(alice_client, baseline, candidate)

    assert response.status_code == 200
    assert "share no scorer" in response.content.decode()


def test_skipped_scores_are_counted_apart_and_defined(
    alice_client: Client, dataset: Dataset
) -> None:
    baseline, candidate = make_run(dataset), make_run(dataset)
    items = list(dataset.items.order_by("index"))
    for i, item in enumerate(items):
        add_result(baseline, item, {"exact_match": "skipped" if i < 3 else 1.0})
        add_result(candidate, item, {"exact_match": 1.0})

    response = _get(alice_client, finish(baseline), finish(candidate))

    page = response.content.decode()
    [row] = response.context["comparison"].scorers
    assert (row.paired, row.skipped) == (len(items) - 3, 3)
    assert "3 skipped</span>" in page
    assert "is not a pair for that scorer" in page
    assert 'id="unpaired">0 ' in page


def test_page_names_the_sign_flip_test_of_a_numeric_scorer(
    alice_client: Client, dataset: Dataset
) -> None:
    baseline, candidate = make_run(dataset), make_run(dataset)
    items = list(dataset.items.order_by("index")[:3])
    pairs = [(0.5, 0.6), (0.3, 0.4), (0.2, 0.3)]
    for item, (before, after) in zip(items, pairs, strict=True):
        add_result(baseline, item, {"exact_match": before})
        add_result(candidate, item, {"exact_match": after})

    page = _get(alice_client, finish(baseline), finish(candidate)).content.decode()

    assert "sign-flip permutation (exact)" in page
    assert "no bounded interval" in page  # three items: p is at least 1/4
    assert "bootstrap" not in page


def _python_calls(client: Client, baseline: Run, candidate: Run, page: str) -> int:
    for cache in caches.all():
        cache.clear()
    profile = cProfile.Profile()
    response = profile.runcall(_get, client, baseline, candidate, page=page)
    assert response.status_code == 200
    return pstats.Stats(profile).total_calls  # type: ignore[attr-defined]  # not in the stubs


def test_item_table_rows_cost_few_python_calls_each(
    alice_client: Client, project: Project
) -> None:
    dataset = make_dataset(project, arithmetic_items(60), name="sixty")
    baseline, candidate = paired_runs(
        dataset, both_passed=20, regressions=20, improvements=10, both_failed=10
    )
    _python_calls(alice_client, baseline, candidate, "1")  # imports, compiled reads

    fifty = _python_calls(alice_client, baseline, candidate, "1")
    ten = _python_calls(alice_client, baseline, candidate, "2")

    # Counted, not timed: a row, read and rendered in Python, costs about 510
    # calls; rendered through the template language it cost about 1,360.
    per_row = (fifty - ten) / 40
    assert per_row < 800, per_row


def test_a_second_view_of_the_same_comparison_is_the_cached_page(
    alice_client: Client, runs: tuple[Run, Run]
) -> None:
    """The page was computed and rendered for every request (a fifth of the
    server's time under a mixed load): now once per state of its runs."""
    first = _get(alice_client, *runs).content.decode()
    with CaptureQueriesContext(connection) as again:
        second = _get(alice_client, *runs).content.decode()

    # The session's user and, per run, its row and scoring passes.
    assert len(again.captured_queries) <= 1 + 2 * len(runs)
    # The same page but its CSRF token (64 letters and digits, masked anew).
    token = re.compile(r"[A-Za-z0-9]{64}")
    assert token.sub("", second) == token.sub("", first)


def test_a_comparison_page_follows_a_renamed_run_and_stored_results(
    alice_client: Client, runs: tuple[Run, Run]
) -> None:
    candidate = runs[1]
    _get(alice_client, *runs)
    Run.objects.filter(pk=candidate.pk).update(name="renamed candidate")
    assert "renamed candidate" in _get(alice_client, *runs).content.decode()

    assert _get(alice_client, *runs).context is None  # from the cache
    results_changed(candidate)  # a re-score, a retry, a review's label
    assert _get(alice_client, *runs).context is not None  # rendered again
