"""GET /api/v1/leaderboard and the leaderboard page: runs ranked over the
items they share, scoped to the user."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest
from django.test import Client
from scipy import stats
from statsmodels.stats.contingency_tables import cochrans_q

from runs.models import Dataset, Project, Result, Run, Score
from runs.records.versions import runs_results_changed
from tests.comparisons import add_result, finish, make_run
from tests.factories import arithmetic_items, make_dataset

URL = "/api/v1/leaderboard"
PAGE = "/leaderboard/"

pytestmark = pytest.mark.django_db


def _runs(
    dataset: Dataset,
    columns: Sequence[Sequence[float]],
    *,
    scorer: str = "exact_match",
    epochs: int = 1,
) -> list[Run]:
    """One finished run per column of values, item by item (epoch by epoch)."""
    items = list(dataset.items.order_by("index"))
    runs = []
    for number, column in enumerate(columns):
        run = make_run(dataset, scorers=[scorer], name=f"run {number}", epochs=epochs)
        for position, value in enumerate(column):
            item = items[position // epochs]
            add_result(run, item, {scorer: value}, epoch=position % epochs)
        runs.append(finish(run))
    return runs


@pytest.fixture
def big(project: Project) -> Dataset:
    return make_dataset(project, arithmetic_items(60), name="sixty")


@pytest.fixture
def three(big: Dataset) -> tuple[list[Run], np.ndarray]:
    rng = np.random.default_rng(5)
    strong = (rng.random(60) < 0.95).astype(float)
    close = np.where(rng.random(60) < 0.95, strong, 1 - strong)
    weak = (rng.random(60) < 0.3).astype(float)
    matrix = np.column_stack([weak, strong, close])
    return _runs(big, matrix.T.tolist()), matrix


def _ids(runs: Sequence[Run]) -> str:
    return ",".join(str(run.pk) for run in runs)


def test_leaderboard_ranks_runs_with_cochran_and_shared_ranks(
    victor_client: Client, three: tuple[list[Run], np.ndarray]
) -> None:
    runs, matrix = three
    body = victor_client.get(URL, {"runs": _ids(runs)}).json()
    assert body["runs"] == [run.pk for run in runs]
    assert "1 + the number of runs significantly better" in body["rank_rule"]
    (board,) = body["scorers"]
    assert board["items"] == 60
    assert board["omnibus_test"] == "cochrans_q"
    reference = cochrans_q(matrix)
    assert board["statistic"] == pytest.approx(reference.statistic)
    assert board["p_value"] == pytest.approx(reference.pvalue)
    ranks = {row["run"]: (row["rank"], row["tied"]) for row in board["standings"]}
    weak, strong, close = (run.pk for run in runs)
    assert ranks[strong] == (1, True) and ranks[close] == (1, True)
    assert ranks[weak] == (3, False)
    row = next(row for row in board["standings"] if row["run"] == strong)
    assert row["figure"] == pytest.approx(matrix[:, 1].mean())
    wilson = stats.binomtest(int(matrix[:, 1].sum()), 60).proportion_ci(method="wilson")
    assert row["interval"] == pytest.approx([wilson.low, wilson.high])
    pair = next(
        p for p in board["pairs"] if {p["first"], p["second"]} == {weak, strong}
    )
    assert pair["test"] == "mcnemar_exact" and pair["significant"]


def test_items_missing_from_a_run_are_left_out(
    victor_client: Client, big: Dataset
) -> None:
    runs = _runs(big, [[1.0] * 60, [0.0] * 60])
    shorter = _runs(big, [[1.0] * 40])
    body = victor_client.get(URL, {"runs": _ids([*runs, *shorter])}).json()
    assert body["scorers"][0]["items"] == 40


def test_numeric_scores_over_epochs_use_friedman(
    victor_client: Client, big: Dataset
) -> None:
    rng = np.random.default_rng(9)
    base = np.round(rng.uniform(0, 1, 30 * 2), 3)
    columns = [base, np.minimum(base + 0.3, 1), np.maximum(base - 0.01, 0)]
    runs = _runs(big, [c.tolist() for c in columns], scorer="f1", epochs=2)
    body = victor_client.get(URL, {"runs": _ids(runs)}).json()
    (board,) = body["scorers"]
    assert board["measure"] == "mean"
    assert board["omnibus_test"] == "friedman"
    item_means = np.column_stack([c.reshape(30, 2).mean(axis=1) for c in columns])
    reference = stats.friedmanchisquare(*item_means.T)
    assert board["statistic"] == pytest.approx(reference.statistic)
    assert board["standings"][0]["run"] == runs[1].pk
    assert board["standings"][0]["figure"] == pytest.approx(item_means[:, 1].mean())


def test_runs_over_two_datasets_are_refused(
    victor_client: Client, big: Dataset, dataset: Dataset
) -> None:
    first = _runs(big, [[1.0] * 5])
    second = _runs(dataset, [[1.0] * 5])
    response = victor_client.get(URL, {"runs": _ids([*first, *second])})
    assert response.status_code == 400
    assert response.json()["field"] == "runs"


def test_bad_run_list_is_refused(victor_client: Client) -> None:
    response = victor_client.get(URL, {"runs": "1,x"})
    assert response.status_code == 400
    assert response.json()["field"] == "runs"


def test_outsider_cannot_rank_a_project_s_runs(
    mallory_client: Client, three: tuple[list[Run], np.ndarray]
) -> None:
    runs, _ = three
    assert mallory_client.get(URL, {"runs": _ids(runs)}).status_code == 404
    assert mallory_client.get(PAGE, {"runs": _ids(runs)}).status_code == 404


def test_a_run_of_another_project_hides_the_leaderboard(
    mallory_client: Client,
    three: tuple[list[Run], np.ndarray],
    other_project: Project,
) -> None:
    theirs = _runs(make_dataset(other_project, arithmetic_items(5)), [[1.0] * 5])
    runs, _ = three
    response = mallory_client.get(URL, {"runs": _ids([*theirs, runs[0]])})
    assert response.status_code == 404


def test_a_new_result_moves_the_cached_leaderboard(
    victor_client: Client, big: Dataset
) -> None:
    first, second = _runs(big, [[1.0] * 10, [0.0] * 10])
    before = victor_client.get(URL, {"runs": _ids([first, second])}).json()
    assert before["scorers"][0]["items"] == 10
    items = list(big.items.order_by("index"))
    add_result(first, items[10], {"exact_match": 1.0})
    add_result(second, items[10], {"exact_match": 1.0})
    finish(first), finish(second)
    after = victor_client.get(URL, {"runs": _ids([first, second])}).json()
    assert after["scorers"][0]["items"] == 11


def test_page_shows_ranks_with_ties_and_the_rule(
    victor_client: Client, three: tuple[list[Run], np.ndarray]
) -> None:
    runs, _ = three
    response = victor_client.get(PAGE, {"runs": _ids(runs)})
    assert response.status_code == 200
    text = response.content.decode()
    assert text.count('class="num rank">1=</td>') == 2
    assert 'class="num rank">3</td>' in text
    assert "Cochran&#x27;s Q" in text or "Cochran's Q" in text
    assert "significantly better than this one" in text


def test_ticked_runs_go_to_their_leaderboard(
    victor_client: Client, three: tuple[list[Run], np.ndarray]
) -> None:
    runs, _ = three
    response = victor_client.get(PAGE, {"run": [run.pk for run in runs]})
    assert response.status_code == 302
    assert response["Location"] == f"{PAGE}?runs={_ids(runs).replace(',', '%2C')}"


def test_page_without_runs_says_how_to_rank(victor_client: Client) -> None:
    response = victor_client.get(PAGE)
    assert response.status_code == 400
    assert "press “Rank”" in response.content.decode()


def test_runs_list_has_a_rank_button(
    victor_client: Client, three: tuple[list[Run], np.ndarray]
) -> None:
    text = victor_client.get("/").content.decode()
    assert 'formaction="/leaderboard/"' in text
    assert 'id="rank-button"' in text


def test_pairwise_tests_are_the_comparison_s(
    victor_client: Client, big: Dataset
) -> None:
    rng = np.random.default_rng(11)
    base = np.round(rng.uniform(0, 1, 60), 3)
    columns = [base, np.round(np.clip(base + rng.normal(0.05, 0.1, 60), 0, 1), 3)]
    scored = _runs(big, [c.tolist() for c in columns], scorer="f1")
    passed = _runs(big, [(c >= 0.5).astype(float).tolist() for c in columns])
    for first, second in (scored, passed):
        board = victor_client.get(URL, {"runs": _ids([first, second])}).json()
        row = victor_client.get(
            "/api/v1/compare", {"baseline": first.pk, "candidates": str(second.pk)}
        ).json()["scorers"][0]
        (pair,) = board["scorers"][0]["pairs"]
        assert pair["test"] == row["test"]
        # The numeric test draws resamples: the same up to one resample's weight.
        assert pair["p_value"] == pytest.approx(row["p_value"], abs=1e-3)
        assert pair["delta"] == pytest.approx(row["delta"])


def test_one_scorer_alone(victor_client: Client, big: Dataset) -> None:
    runs = _runs(big, [[1.0] * 10, [0.0] * 10])
    body = victor_client.get(URL, {"runs": _ids(runs), "scorer": "exact_match"})
    assert [board["scorer"] for board in body.json()["scorers"]] == ["exact_match"]
    response = victor_client.get(URL, {"runs": _ids(runs), "scorer": "nope"})
    assert response.status_code == 400
    assert response.json()["field"] == "scorer"


def test_pass_fail_epochs_that_disagree_rank_pass_fractions(
    victor_client: Client, big: Dataset
) -> None:
    rng = np.random.default_rng(4)
    columns = [(rng.random(40) < rate).astype(float) for rate in (0.2, 0.5, 0.9)]
    runs = _runs(big, [c.tolist() for c in columns], epochs=2)
    (board,) = victor_client.get(URL, {"runs": _ids(runs)}).json()["scorers"]
    fractions = np.column_stack([c.reshape(20, 2).mean(axis=1) for c in columns])
    assert board["measure"] == "pass_rate"
    assert board["omnibus_test"] == "friedman"
    assert board["interval"] == "normal_item_means"
    reference = stats.friedmanchisquare(*fractions.T)
    assert board["statistic"] == pytest.approx(reference.statistic)
    figures = {row["run"]: row["figure"] for row in board["standings"]}
    assert figures[runs[2].pk] == pytest.approx(fractions[:, 2].mean())


@pytest.mark.parametrize("epochs", [1, 2])
def test_results_stopped_in_flight_are_no_sample_of_a_run(
    victor_client: Client, big: Dataset, epochs: int
) -> None:
    rng = np.random.default_rng(11)
    first = (rng.random(60 * epochs) < 0.8).astype(float)
    second = np.ones(60 * epochs)
    runs = _runs(big, [first.tolist(), second.tolist()], epochs=epochs)
    # The second run was cancelled with its last ten items' calls in flight.
    cut = Result.objects.filter(run=runs[1], item_index__gte=50)
    cut.update(status=Result.Status.CANCELLED, output=None)
    Score.objects.filter(result__in=cut).delete()
    runs_results_changed(run.pk for run in runs)
    body = victor_client.get(URL, {"runs": _ids(runs)}).json()
    (board,) = body["scorers"]
    assert board["items"] == 50
    row = next(row for row in board["standings"] if row["run"] == runs[1].pk)
    assert row["figure"] == pytest.approx(1.0)
