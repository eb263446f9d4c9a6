"""The evaluation page says what its next run would cost, and each run's
estimate against what it cost."""

from __future__ import annotations

import html
import re

import pytest
from django.contrib.auth.models import User
from django.test import Client

from runs.evaluations.services import evaluation_run
from runs.executor.store import run_finish
from runs.models import Dataset, Evaluation, Project, Result, Run, Target
from tests.evaluations.conftest import make_evaluation
from tests.factories import store_outcomes

pytestmark = pytest.mark.django_db

# US dollars per million tokens: prompt, completion.
PROMPT_PRICE, COMPLETION_PRICE = 1000.0, 3000.0


@pytest.fixture(autouse=True)
def prices(settings) -> None:
    settings.EVALSITE_PRICES = {"fake": (PROMPT_PRICE, COMPLETION_PRICE)}


@pytest.fixture
def priced(project: Project, dataset: Dataset, bob: User) -> Evaluation:
    target = Target.objects.create(
        project=project,
        name="fake",
        kind="openai_chat",
        config={"base_url": "http://127.0.0.1:9/v1", "model": "fake"},
    )
    return make_evaluation(project, dataset, bob, target=target)


def text_of(response: object) -> str:
    page = response.content.decode()  # type: ignore[attr-defined]  # a test response
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page)))


def per_item(prompt: int, completion: int) -> float:
    return (prompt * PROMPT_PRICE + completion * COMPLETION_PRICE) / 1_000_000


def ended(evaluation: Evaluation, user: User, prompt: int, completion: int) -> Run:
    """A run of the evaluation whose every item used these tokens."""
    run = evaluation_run(evaluation=evaluation, user=user)
    store_outcomes(run, [{"scores": [("exact_match", True, "")]}] * run.total)
    cost = per_item(prompt, completion)
    Result.objects.filter(run=run).update(
        prompt_tokens=prompt, completion_tokens=completion, cost=cost
    )
    run_finish(run.pk, cancelled=False)
    Run.objects.filter(pk=run.pk).update(cost=round(cost * run.total, 9))
    run.refresh_from_db()
    return run


def test_with_no_past_run_the_page_says_there_is_no_estimate_yet(
    priced: Evaluation, victor_client: Client
) -> None:
    page = text_of(victor_client.get(f"/evaluations/{priced.pk}/"))
    assert "Next run no estimate yet: no finished run of this target" in page


def test_the_page_shows_the_next_runs_estimate_and_each_runs_against_actual(
    priced: Evaluation, bob: User, victor_client: Client
) -> None:
    first = ended(priced, bob, prompt=100, completion=20)
    assert first.estimated_cost is None  # nothing to estimate it from
    page = text_of(victor_client.get(f"/evaluations/{priced.pk}/"))
    items = first.total
    assert items == 10
    expected = per_item(100, 20) * items  # $1.60
    assert f"about ${expected:.2f} for 10 items \N{MULTIPLICATION SIGN} 1 epoch" in page
    second = ended(priced, bob, prompt=50, completion=10)
    assert second.estimated_cost == pytest.approx(expected)
    page = text_of(victor_client.get(f"/evaluations/{priced.pk}/"))
    actual = per_item(50, 10) * items  # $0.80: half the estimate
    assert f"${expected:.2f} ${actual:.2f} (50% of the estimate)" in page
    # The next run: the mean tokens of both past runs.
    mean = per_item((100 + 50) // 2, (20 + 10) // 2) * items
    assert f"about ${mean:.2f} for 10 items" in page


def test_a_target_since_deleted_says_why_there_is_no_estimate(
    priced: Evaluation, victor_client: Client
) -> None:
    Target.objects.filter(pk=priced.target_id).delete()
    page = text_of(victor_client.get(f"/evaluations/{priced.pk}/"))
    assert "no estimate: its target was deleted" in page


def test_with_no_estimate_the_page_offers_a_paid_sample(
    priced: Evaluation, bob_client: Client
) -> None:
    page = bob_client.get(f"/evaluations/{priced.pk}/").content.decode()
    assert 'id="sample-form"' in page and "(charged)" in page
    answer = bob_client.post(
        f"/evaluations/{priced.pk}/sample/", {"items": 2}, follow=True
    )
    (sample,) = Run.objects.all()
    assert (sample.name, sample.item_limit, sample.total) == (
        "Cost sample: 2 items",
        2,
        2,
    )
    assert sample.evaluation is None  # its own run, not one of the evaluation's
    assert sample.target_id == priced.target_id
    assert f"Run #{sample.pk} sends 2 items" in answer.content.decode()


def test_a_sample_too_large_is_refused_on_the_page(
    priced: Evaluation, bob_client: Client
) -> None:
    answer = bob_client.post(
        f"/evaluations/{priced.pk}/sample/", {"items": 99}, follow=True
    )
    assert "No sample was sent: items must be from 1 to" in answer.content.decode()
    assert not Run.objects.exists()


def test_a_viewer_is_offered_no_sample(
    priced: Evaluation, victor_client: Client
) -> None:
    page = victor_client.get(f"/evaluations/{priced.pk}/").content.decode()
    assert 'id="sample-form"' not in page
