"""A queue's agreement (checked against statsmodels and the krippendorff
package), its disputed items, and an adjudicator's label settling them."""

from __future__ import annotations

import json

import krippendorff
import numpy as np
import pytest
from statsmodels.stats.inter_rater import (
    aggregate_raters,
    cohens_kappa,
    fleiss_kappa,
    to_table,
)

from runs.models import ReviewAdjudication, Score
from runs.review.agreement import queue_agreement
from runs.review.services import label_next, label_save, queue_create
from tests.review.builders import ended_run
from tests.review.test_labels import label_all

API = "/api/v1/review-queues"
FIRST = ["pass", "pass", "fail", "pass", "fail", "fail", "pass", "pass", "fail", "pass"]
SECOND = [
    "pass",
    "fail",
    "fail",
    "pass",
    "fail",
    "pass",
    "pass",
    "pass",
    "fail",
    "fail",
]


@pytest.fixture
def labelled(alice, bob, dataset):
    """A pass/fail queue that alice and bob labelled with FIRST and SECOND."""
    queue = queue_create(user=bob, run=ended_run(dataset), name="q", raters=2)
    label_all(alice, queue, FIRST)
    label_all(bob, queue, SECOND)
    return queue


def _by_name(section):
    return {each["statistic"]: each for each in section["estimates"]}


def test_the_api_agreement_matches_statsmodels(bob_client, labelled):
    response = bob_client.get(f"{API}/{labelled.pk}/agreement")
    assert response.status_code == 200, response.content
    (section,) = response.json()
    found = _by_name(section)
    codes = np.array([[v == "pass" for v in FIRST], [v == "pass" for v in SECOND]])
    table, _ = to_table(codes.T.astype(int))
    assert found["cohen_kappa"]["value"] == pytest.approx(cohens_kappa(table).kappa)
    counts, _ = aggregate_raters(codes.T.astype(int))
    assert found["fleiss_kappa"]["value"] == pytest.approx(fleiss_kappa(counts))
    alpha = krippendorff.alpha(
        reliability_data=codes.astype(float), level_of_measurement="nominal"
    )
    assert found["krippendorff_alpha_nominal"]["value"] == pytest.approx(alpha)
    agree = sum(a == b for a, b in zip(FIRST, SECOND, strict=True)) / len(FIRST)
    assert found["percent_agreement"]["value"] == pytest.approx(agree)
    low, high = found["cohen_kappa"]["interval"]
    assert low <= found["cohen_kappa"]["value"] <= high
    disputed = [row["position"] for row in section["disputed"]]
    expected = [i for i, (a, b) in enumerate(zip(FIRST, SECOND, strict=True)) if a != b]
    assert disputed == expected
    assert set(section["disputed"][0]["labels"]) == {"alice", "bob"}


def test_a_scale_is_measured_at_ordinal_and_interval_levels(alice, bob, dataset):
    queue = queue_create(
        user=bob,
        run=ended_run(dataset),
        name="s",
        raters=2,
        rubric={"kind": "scale"},
    )
    first = [1, 2, 3, 4, 5, 5, 4, 3, 2, 1]
    second = [1, 3, 3, 5, 4, 5, 4, 2, 2, 2]
    label_all(alice, queue, first)
    label_all(bob, queue, second)
    (section,) = queue_agreement(queue=queue, replicates=50)
    found = {e.statistic: e for e in section.estimates}
    data = np.array([first, second], dtype=float)
    for level in ("ordinal", "interval"):
        reference = krippendorff.alpha(
            reliability_data=data,
            level_of_measurement=level,
            value_domain=[1, 2, 3, 4, 5],
        )
        assert found[f"krippendorff_alpha_{level}"].value == pytest.approx(reference)
    assert "krippendorff_alpha_nominal" not in found
    assert "cohen_kappa_quadratic" in found


def test_each_criterion_is_measured(alice, bob, dataset):
    queue = queue_create(
        user=bob,
        run=ended_run(dataset),
        name="c",
        raters=2,
        rubric={"kind": "pass_fail", "criteria": ["tone"]},
    )
    for user, values in ((alice, FIRST), (bob, SECOND)):
        for value in values:
            label = label_next(user=user, queue=queue)
            assert label is not None
            label_save(user=user, label=label, value=value, criteria={"tone": "pass"})
    overall, tone = queue_agreement(queue=queue, replicates=50)
    assert overall.criterion is None and tone.criterion == "tone"
    kappa = {e.statistic: e for e in tone.estimates}["cohen_kappa"]
    assert kappa.value is None and kappa.undefined
    assert tone.disputed == []


def test_no_labels_yet_says_so(bob, dataset):
    queue = queue_create(user=bob, run=ended_run(dataset), name="q", raters=2)
    (section,) = queue_agreement(queue=queue)
    assert section.undefined == "no labels yet"


def test_agreement_is_for_editors_of_the_project(
    victor_client, mallory_client, labelled
):
    assert victor_client.get(f"{API}/{labelled.pk}/agreement").status_code == 403
    assert mallory_client.get(f"{API}/{labelled.pk}/agreement").status_code == 404
    page = f"/review/{labelled.pk}/agreement/"
    assert victor_client.get(page).status_code == 403
    assert mallory_client.get(page).status_code == 404


def test_the_page_shows_kappa_and_the_disputed_items(bob_client, labelled):
    response = bob_client.get(f"/review/{labelled.pk}/agreement/")
    assert response.status_code == 200
    codes = np.array([[v == "pass" for v in FIRST], [v == "pass" for v in SECOND]])
    table, _ = to_table(codes.T.astype(int))
    html = response.content.decode()
    assert f"{cohens_kappa(table).kappa:.3f}" in html
    assert 'data-statistic="cohen_kappa"' in html
    disputed = sum(a != b for a, b in zip(FIRST, SECOND, strict=True))
    assert html.count("Settle</button>") == disputed == 3


def _consensus(queue, position):
    item = queue.items.get(position=position)
    return Score.objects.get(result_id=item.result_id, scorer=queue.scorer_name)


def test_an_adjudicator_settles_a_disputed_item(bob, bob_client, labelled):
    item = labelled.items.get(position=1)  # alice pass, bob fail: a tie
    assert _consensus(labelled, 1).passed is None
    response = bob_client.post(
        f"{API}/{labelled.pk}/items/{item.pk}/adjudication",
        json.dumps({"value": "fail", "note": "misses the unit"}),
        content_type="application/json",
    )
    assert response.status_code == 201, response.content
    assert response.json()["user"] == "bob"
    score = _consensus(labelled, 1)
    assert score.passed is False and score.reason == "adjudicated: fail"
    row = ReviewAdjudication.objects.get(review_item=item)
    assert row.user == bob and row.changed_at is not None
    # A second settling is kept too; the latest wins.
    bob_client.post(
        f"{API}/{labelled.pk}/items/{item.pk}/adjudication",
        json.dumps({"value": "pass"}),
        content_type="application/json",
    )
    assert _consensus(labelled, 1).passed is True
    assert ReviewAdjudication.objects.filter(review_item=item).count() == 2
    (section,) = bob_client.get(f"{API}/{labelled.pk}/agreement").json()
    settled = {row["position"]: row for row in section["disputed"]}[1]
    assert settled["settled"] == "pass" and settled["settled_by"] == "bob"
    # Withdrawn: the raters' tie is back.
    response = bob_client.delete(f"{API}/{labelled.pk}/items/{item.pk}/adjudication")
    assert response.status_code == 204
    assert _consensus(labelled, 1).passed is None


def test_the_page_form_settles_an_item(bob_client, labelled):
    item = labelled.items.get(position=1)
    response = bob_client.post(
        f"/review/{labelled.pk}/items/{item.pk}/adjudicate/", {"value": '"fail"'}
    )
    assert response.status_code == 302
    assert _consensus(labelled, 1).passed is False
    bad = bob_client.post(
        f"/review/{labelled.pk}/items/{item.pk}/adjudicate/", {"value": '"maybe"'}
    )
    assert bad.status_code == 302
    assert ReviewAdjudication.objects.filter(review_item=item).count() == 1


def test_adjudication_is_refused_to_viewers_and_other_projects(
    victor_client, mallory_client, labelled
):
    item = labelled.items.get(position=1)
    url = f"{API}/{labelled.pk}/items/{item.pk}/adjudication"
    body = json.dumps({"value": "fail"})
    kind = "application/json"
    assert victor_client.post(url, body, content_type=kind).status_code == 403
    assert mallory_client.post(url, body, content_type=kind).status_code == 404
    page = f"/review/{labelled.pk}/items/{item.pk}/adjudicate/"
    assert victor_client.post(page, {"value": '"fail"'}).status_code == 403
    assert mallory_client.post(page, {"value": '"fail"'}).status_code == 404
    assert not ReviewAdjudication.objects.exists()


def test_a_bad_adjudication_names_the_field(bob_client, labelled):
    item = labelled.items.get(position=1)
    response = bob_client.post(
        f"{API}/{labelled.pk}/items/{item.pk}/adjudication",
        json.dumps({"value": 7}),
        content_type="application/json",
    )
    assert response.status_code == 400
    assert "value" in response.content.decode()
    assert not ReviewAdjudication.objects.exists()


def test_three_raters_with_a_missing_label_match_the_references(
    alice, bob, victor, dataset
):
    """Fleiss' kappa over the items all three labelled; alpha with the gap."""
    queue = queue_create(user=bob, run=ended_run(dataset), name="t", raters=3)
    third = ["pass", "fail", "fail", "fail", "fail", "pass", "pass", "pass", "pass"]
    label_all(alice, queue, FIRST)
    label_all(bob, queue, SECOND)
    label_all(victor, queue, third)  # the last item has two labels only
    (section,) = queue_agreement(queue=queue, replicates=50)
    found = {e.statistic: e for e in section.estimates}
    rows = [FIRST, SECOND, [*third, None]]
    data = np.array(
        [[np.nan if v is None else float(v == "pass") for v in row] for row in rows]
    )
    alpha = krippendorff.alpha(reliability_data=data, level_of_measurement="nominal")
    assert found["krippendorff_alpha_nominal"].value == pytest.approx(alpha)
    complete = data[:, :9].T.astype(int)
    counts, _ = aggregate_raters(complete)
    assert found["fleiss_kappa"].value == pytest.approx(fleiss_kappa(counts))
    assert "cohen_kappa" not in found


def test_the_disputed_list_is_cut_and_counted(bob_client, labelled):
    url = f"{API}/{labelled.pk}/agreement"
    (section,) = bob_client.get(f"{url}?disputed=1").json()
    assert section["disputed_total"] == 3
    assert [row["position"] for row in section["disputed"]] == [1]
    assert bob_client.get(f"{url}?disputed=-1").status_code in (400, 422)
