"""The rows of the results table and of the comparison's items are rendered in
Python (``runs/templatetags/result_rows.py``): every text an item, a model or
a scorer supplies is escaped there as the template language escaped it."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from runs.models import Item, Result, Run
from tests.comparisons import add_result, finish, make_run
from tests.factories import make_dataset, store_outcomes

pytestmark = pytest.mark.django_db

HOSTILE = {
    "input": '<script>alert("input")</script>',
    "expected": '"><img src=x onerror=alert(2)>',
    "output": "</td><script>alert('output')</script>",
    "error": "<b onmouseover=alert(3)>boom</b>",
    "reason": "<script>alert('reason')</script>",
}
RAW = [*HOSTILE.values(), "<script>", "<img", "<b "]


def _dataset(project):
    items = [
        {"id": f'q{i}"<i>', "input": HOSTILE["input"], "expected": HOSTILE["expected"]}
        for i in range(3)
    ]
    return make_dataset(project, items, name="hostile")


def _clean(page: str) -> None:
    for raw in RAW:
        assert raw not in page
    assert "&lt;script&gt;alert(&quot;input&quot;)&lt;/script&gt;" in page


def test_the_results_table_escapes_what_items_models_and_scorers_wrote(
    alice_client: Client, project
) -> None:
    dataset = _dataset(project)
    run = make_run(dataset)
    store_outcomes(
        run,
        [
            {"scores": [("exact_match", False, HOSTILE["reason"])]},
            {"error": ("permanent", "HTTPError", HOSTILE["error"])},
            {"scores": [("exact_match", True, HOSTILE["reason"])]},
        ],
    )
    Result.objects.filter(run=run, status="succeeded").update(output=HOSTILE["output"])
    for view in (run, finish(run)):
        page = alice_client.get(reverse("runs:run_detail", args=[view.pk])).content
        _clean(page.decode())
        shown = page.decode()
        assert "&lt;/td&gt;&lt;script&gt;alert(&#x27;output&#x27;)" in shown
        assert "&lt;b onmouseover=alert(3)&gt;boom" in shown
        assert "&quot;&gt;&lt;img src=x onerror=alert(2)&gt;" in shown
        assert "&lt;script&gt;alert(&#x27;reason&#x27;)" in shown


def test_the_comparisons_item_rows_escape_what_items_and_models_wrote(
    alice_client: Client, project
) -> None:
    dataset = _dataset(project)
    baseline, candidate = make_run(dataset), make_run(dataset)
    for index, item in enumerate(Item.objects.filter(dataset=dataset)):
        add_result(baseline, item, {"exact_match": 1.0}, output=HOSTILE["output"])
        add_result(
            candidate, item, {"exact_match": float(index % 2)}, output=HOSTILE["output"]
        )
    finish(baseline), finish(candidate)
    page = alice_client.get(
        reverse("runs:compare"),
        {"baseline": baseline.pk, "candidates": str(candidate.pk)},
    ).content.decode()
    assert Run.objects.count() == 2
    _clean(page)
    assert "&lt;/td&gt;&lt;script&gt;alert(&#x27;output&#x27;)" in page
