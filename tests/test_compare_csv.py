"""The comparison's per-item table as CSV, from the page and the API."""

from __future__ import annotations

import csv
import io

import pytest
from django.test import Client
from django.urls import reverse

from runs.models import Dataset, Project, Result, Run
from tests.comparisons import add_result, finish, make_run, paired_runs
from tests.factories import arithmetic_items, make_dataset

pytestmark = pytest.mark.django_db

PAGE = reverse("runs:compare_items_csv")
API = "/api/v1/compare/items"


@pytest.fixture
def runs(dataset: Dataset) -> tuple[Run, Run]:
    return paired_runs(
        dataset, both_passed=3, regressions=2, improvements=4, both_failed=1
    )


def _rows(response) -> list[dict[str, str]]:
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    body = b"".join(response.streaming_content).decode()
    return list(csv.DictReader(io.StringIO(body)))


def _query(baseline: Run, candidate: Run, **extra: str) -> dict[str, object]:
    return {
        "baseline": baseline.pk,
        "candidate": candidate.pk,
        "scorer": "exact_match",
        **extra,
    }


@pytest.mark.parametrize("url", [PAGE, API])
def test_csv_lists_every_paired_item_with_its_change(
    alice_client: Client, runs: tuple[Run, Run], url: str
) -> None:
    rows = _rows(alice_client.get(url, _query(*runs)))

    assert len(rows) == 10
    changes = [row["change"] for row in rows]
    assert changes.count("regressions") == 2
    assert changes.count("improvements") == 4
    assert changes.count("both_passed") == 3
    assert changes.count("both_failed") == 1


@pytest.mark.parametrize("url", [PAGE, API])
def test_csv_keeps_the_pages_change_filter(
    alice_client: Client, runs: tuple[Run, Run], url: str
) -> None:
    rows = _rows(alice_client.get(url, _query(*runs, change="regressions")))

    assert [row["external_id"] for row in rows] == ["q3", "q4"]
    baseline, candidate = runs
    for row in rows:
        assert Result.objects.get(pk=row["baseline_result"]).run_id == baseline.pk
        assert Result.objects.get(pk=row["candidate_result"]).run_id == candidate.pk


def test_csv_cells_cannot_start_a_formula(
    alice_client: Client, runs: tuple[Run, Run]
) -> None:
    baseline, candidate = runs
    Result.objects.filter(run=candidate).update(output='=HYPERLINK("x")')

    rows = _rows(alice_client.get(PAGE, _query(baseline, candidate)))

    assert {row["candidate_output"] for row in rows} == {'\'=HYPERLINK("x")'}


def test_a_scorer_not_in_both_runs_is_refused_naming_it(
    alice_client: Client, runs: tuple[Run, Run]
) -> None:
    response = alice_client.get(API, _query(*runs, scorer="judge"))

    assert response.status_code == 400
    assert "scorer" in response.content.decode()


@pytest.mark.parametrize("url", [PAGE, API])
def test_outsider_gets_404(
    mallory_client: Client, runs: tuple[Run, Run], url: str
) -> None:
    assert mallory_client.get(url, _query(*runs)).status_code == 404


def test_page_links_the_csv_of_what_it_shows(
    alice_client: Client, runs: tuple[Run, Run]
) -> None:
    baseline, candidate = runs
    page = alice_client.get(
        reverse("runs:compare"),
        {"baseline": baseline.pk, "candidates": candidate.pk, "change": "regressions"},
    ).content.decode()

    assert f"{PAGE}?baseline={baseline.pk}&amp;candidate={candidate.pk}" in page
    assert "change=regressions" in page


def _bad_queries(baseline: Run, candidate: Run, elsewhere: Run) -> dict[str, tuple]:
    """Each bad query of the CSV, with the field its error names."""
    good = _query(baseline, candidate)
    return {
        "no baseline": ({k: v for k, v in good.items() if k != "baseline"}, "baseline"),
        "baseline not a number": ({**good, "baseline": "first"}, "baseline"),
        "two baselines": (
            {**good, "baseline": f"{baseline.pk},{candidate.pk}"},
            "baseline",
        ),
        "no candidate": (
            {k: v for k, v in good.items() if k != "candidate"},
            "candidate",
        ),
        "candidate out of range": ({**good, "candidate": "9" * 30}, "candidate"),
        "unknown scorer": ({**good, "scorer": "judge"}, "scorer"),
        "unknown change": ({**good, "change": "sideways"}, "change"),
        "the baseline as candidate": ({**good, "candidate": baseline.pk}, "candidates"),
        "a run over another dataset": (
            {**good, "candidate": elsewhere.pk},
            "candidates",
        ),
    }


BAD = [
    "no baseline",
    "baseline not a number",
    "two baselines",
    "no candidate",
    "candidate out of range",
    "unknown scorer",
    "unknown change",
    "the baseline as candidate",
    "a run over another dataset",
]


@pytest.mark.parametrize("bad", BAD)
@pytest.mark.parametrize("url", [PAGE, API])
def test_a_bad_parameter_is_refused_naming_it_never_a_server_error(
    alice_client: Client, runs: tuple[Run, Run], project: Project, bad: str, url: str
) -> None:
    other = make_dataset(project, arithmetic_items(2), name="other")
    elsewhere = finish(make_run(other, scorers=["exact_match"], name="elsewhere"))
    query, field = _bad_queries(*runs, elsewhere)[bad]

    response = alice_client.get(url, query)

    body = response.content.decode()
    if url == PAGE:
        assert response.status_code == 400
        assert f"field &#x27;{field}&#x27;" in body
    else:  # the API checks types and choices first (422), then the rest (400)
        assert response.status_code in (400, 422)
        assert field in body


@pytest.mark.parametrize("url", [PAGE, API])
def test_csv_has_each_items_input_and_expected_answer(
    alice_client: Client, runs: tuple[Run, Run], url: str
) -> None:
    rows = _rows(alice_client.get(url, _query(*runs)))

    first = rows[0]
    item = runs[0].dataset.items.get(external_id=first["external_id"])
    assert (first["input"], first["expected"]) == (item.input, item.expected)


def test_csv_counts_each_sides_epochs_stopped_in_flight(
    alice_client: Client, dataset: Dataset
) -> None:
    baseline = make_run(dataset, epochs=2, name="baseline")
    candidate = make_run(dataset, epochs=2, name="candidate")
    item = dataset.items.get(index=0)
    for run in (baseline, candidate):
        add_result(run, item, {"exact_match": 1.0}, epoch=0)
        add_result(run, item, {"exact_match": 1.0}, epoch=1)
    Result.objects.filter(run=candidate, epoch=1).update(status=Result.Status.CANCELLED)
    finish(baseline), finish(candidate)

    [row] = _rows(alice_client.get(PAGE, _query(baseline, candidate)))

    assert (row["baseline_stopped"], row["candidate_stopped"]) == ("0", "1")
    assert (row["baseline_epochs"], row["candidate_epochs"]) == ("2", "1")
