"""Two reviewers label 100 items each in a real browser, with the keyboard alone.

Each reviewer signs in in a browser context of their own, follows the queue's
link, and then only presses keys: ``p`` or ``f`` for each item (the label is
saved and the next item opens), ``n`` and typing for a note. No page they see
names the run, its target or its model. What they labelled is then read back
as the queue's label matrix and as the run's ``human:`` scorer.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from statsmodels.stats.inter_rater import cohens_kappa, to_table

from tests.browser import (
    CHROMIUM_ARGS,
    PASSWORD,
    USERNAME,
    chromium_path,
    manage_shell,
)

pytestmark = pytest.mark.browser

ITEMS = 100
RUN_NAME = "Zephyr-run-name"
MODEL = "narwhal-model-7b"
TARGET = "Quokka-target-name"
SEED = f"""
from django.contrib.auth.models import User
from django.utils import timezone
from runs.datasets.importers import dataset_create_from_items
from runs.models import Membership, Project, Result, Run
from runs.review.services import queue_create
from tests.factories import echo_run, store_outcomes

owner = User.objects.get(username="tester")
project = Project.objects.get(name="Browser")
for name in ("ada", "grace"):
    user = User.objects.create_user(name, password={PASSWORD!r})
    Membership.objects.create(project=project, user=user, role="viewer")
items = [{{"id": f"r{{i}}", "input": f"Item {{i}}: what is {{i}} + 1?",
          "expected": str(i + 1)}} for i in range({ITEMS})]
dataset = dataset_create_from_items(project=project, user=None, name="review",
                                    items=items)
run = store_outcomes(echo_run(dataset),
                     [{{"scores": [("exact_match", True, "")]}}] * {ITEMS})
Run.objects.filter(pk=run.pk).update(status="completed", finished_at=timezone.now(),
                                     name={RUN_NAME!r}, target_name={TARGET!r})
Result.objects.filter(run=run).update(model={MODEL!r})
run.refresh_from_db()
queue = queue_create(user=owner, run=run, name="keyboard", raters=2)
print(queue.pk, run.pk)
"""
READ_BACK = """
import json
from runs.models import Score
from runs.review.selectors import queue_label_matrix
from runs.models import ReviewQueue
queue = ReviewQueue.objects.get(pk={queue})
matrix = queue_label_matrix(queue=queue)
notes = list(queue.labels.exclude(note="").values_list("note", flat=True))
passed = Score.objects.filter(result__run_id={run}, scorer="human:keyboard",
                              passed=True).count()
print(json.dumps({{"raters": matrix.raters, "items": matrix.items,
                  "values": matrix.values, "notes": notes, "passed": passed}}))
"""


def verdict(reviewer: str, index: int) -> str:
    """What each reviewer answers for an item: they disagree on some."""
    if reviewer == "ada":
        return "fail" if index % 3 == 0 else "pass"
    return "fail" if index % 4 == 0 else "pass"


def sign_in(page, server: str, username: str) -> None:
    page.goto(f"{server}/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.keyboard.press("Enter")
    page.wait_for_url(f"{server}/")


def expected_kappa() -> float:
    """Cohen's kappa of the two reviewers' verdicts, by statsmodels."""
    pairs = [
        [verdict("ada", i) == "pass", verdict("grace", i) == "pass"]
        for i in range(ITEMS)
    ]
    table, _ = to_table([[int(a), int(b)] for a, b in pairs])
    return float(cohens_kappa(table).kappa)


def agreement_kappa(page, server: str, queue: int) -> str:
    """The project's editor reads Cohen's kappa off the queue's agreement page."""
    sign_in(page, server, USERNAME)
    page.goto(f"{server}/review/")
    page.click(f'tr[data-queue="{queue}"] a:text("Agreement")')
    cell = page.locator('tr[data-statistic="cohen_kappa"] td.value')
    return cell.inner_text().strip()


def review_with_keys(page, server: str, queue: int, reviewer: str) -> list[int]:
    """Sign in, open the queue, then label every item with the keyboard."""
    sign_in(page, server, reviewer)
    page.goto(f"{server}/review/{queue}/")
    seen = []
    while page.locator("#review").count():
        html = page.content()
        for secret in (RUN_NAME, MODEL, TARGET, "exact_match"):
            assert secret not in html, (secret, page.url)
        text = page.locator("pre.review-text").first.inner_text()
        index = int(re.match(r"Item (\d+):", text).group(1))
        seen.append(index)
        if index == 7:
            page.keyboard.press("n")
            page.keyboard.type(f"{reviewer} was unsure")
            page.keyboard.press("Escape")
        key = "p" if verdict(reviewer, index) == "pass" else "f"
        with page.expect_navigation():
            page.keyboard.press(key)
    assert page.locator("#review-done").count() == 1
    return seen


def test_two_reviewers_label_100_items_with_the_keyboard(
    server: str, tmp_path: Path
) -> None:
    queue, run = map(int, manage_shell(tmp_path, SEED).split()[-2:])
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=chromium_path(), args=CHROMIUM_ARGS
        )
        problems: list[str] = []
        try:
            for reviewer in ("ada", "grace"):
                page = browser.new_context().new_page()
                page.on("pageerror", lambda error: problems.append(str(error)))
                seen = review_with_keys(page, server, queue, reviewer)
                assert seen == list(range(ITEMS))
            page = browser.new_context().new_page()
            page.on("pageerror", lambda error: problems.append(str(error)))
            kappa = agreement_kappa(page, server, queue)
        finally:
            browser.close()
    assert problems == []
    assert kappa == f"{expected_kappa():.3f}"
    read = manage_shell(tmp_path, READ_BACK.format(queue=queue, run=run))
    found = json.loads(read.strip().splitlines()[-1])
    assert found["raters"] == ["ada", "grace"]
    assert found["items"] == list(range(ITEMS))
    assert found["values"] == [
        [verdict("ada", i), verdict("grace", i)] for i in range(ITEMS)
    ]
    assert sorted(found["notes"]) == ["ada was unsure", "grace was unsure"]
    # Both pass: neither a multiple of 3 nor of 4.
    both = sum(1 for i in range(ITEMS) if i % 3 and i % 4)
    assert found["passed"] == both
