"""A result's page: the heading names the item plainly, and an answer's kept
response body is not shown as an error."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from runs.models import Item, Project, Result, Run, RunStatus
from runs.results.services import run_create
from tests.factories import make_dataset

pytestmark = pytest.mark.django_db

OK_BODY = '{"choices": [{"message": {"content": "4"}}]}'
FAILED_BODY = '{"error": "overloaded"}'


@pytest.fixture
def run(project: Project) -> Run:
    items = [
        {"id": str(i + 1), "input": f"{i} + {i}?", "expected": "x"} for i in range(2)
    ]
    dataset = make_dataset(project, items)
    run = run_create(
        user=None,
        dataset=dataset,
        target_kind="demo",
        scorers=["exact_match"],
        options={"epochs": 2},
        launch=False,
    )
    Run.objects.filter(pk=run.pk).update(status=RunStatus.COMPLETED)
    return run


def _result(run: Run, attempts: list[dict]) -> Result:
    now = timezone.now()
    return Result.objects.create(
        run=run,
        item=Item.objects.get(dataset=run.dataset, index=1),
        item_index=1,
        epoch=1,
        status=Result.Status.SUCCEEDED,
        output="4",
        attempts=attempts,
        started_at=now,
        finished_at=now,
    )


def _page(client: Client, result: Result) -> str:
    url = reverse("runs:result_detail", args=[result.run_id, result.pk])
    response = client.get(url)
    assert response.status_code == 200
    return response.content.decode()


def test_the_heading_says_which_number_is_the_id_and_which_the_epoch(
    bob_client: Client, run: Run
) -> None:
    page = _page(bob_client, _result(run, [{"number": 1, "outcome": "ok"}]))
    heading = re.search(r"<h1>(.*?)<span class=\"badge", page, re.S)[1]
    text = " ".join(re.sub(r"<[^>]+>", "", heading).split())

    assert text == "Item 1 · id 2 · epoch 1"


def test_an_ok_attempts_body_is_not_shown_as_an_error(
    bob_client: Client, run: Run
) -> None:
    result = _result(
        run,
        [
            {
                "number": 1,
                "outcome": "error",
                "error_type": "HTTPError",
                "error_message": "503",
                "raw_body": FAILED_BODY,
            },
            {"number": 2, "outcome": "ok", "raw_body": OK_BODY},
        ],
    )
    rows = re.findall(
        r"<tr>\s*<td class=\"num\">.*?</tr>", _page(bob_client, result), re.S
    )
    failed, ok = (row for row in rows if "overloaded" in row or "choices" in row)

    assert '<td class="error-text">' in failed and "Raw response body" in failed
    assert "error-text" not in ok and "Raw response body" not in ok
    assert "Response body" in ok
