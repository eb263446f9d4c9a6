"""What a researcher reads of a run's results: the results table's question,
expected answer and end of the output, the comparison's items, and a
result's page (the request sent, the finish reason, its neighbours, the
judge's prompt and reason)."""

from __future__ import annotations

import html
import json
import re
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from runs.models import Dataset, Item, Project, Result, Run, RunStatus, Score
from runs.records.versions import results_changed
from runs.results.services import run_create
from runs.testing.fake_openai import FakeOpenAIServer
from tests.factories import make_dataset

# A GSM8K-style answer: the reasoning first, the number it scores last.
REASONING = "Natalia sold 48 clips in April and half as many in May. " * 4
ANSWER = REASONING + "#### 72"
JUDGE_REASON = "The answer states 72, as expected.\nVerdict: PASS"


@pytest.fixture
def word_problems(project: Project) -> Dataset:
    items = [
        {"id": f"p{i}", "input": f"Problem {i}: how many clips?", "expected": "72"}
        for i in range(4)
    ]
    return make_dataset(project, items, name="gsm8k")


def _chat_run(dataset: Dataset, fake: FakeOpenAIServer, **config: Any) -> Run:
    judge = {
        "kind": "llm_judge",
        "name": "judge",
        "params": {"base_url": fake.base_url, "model": "judge-1"},
    }
    run = run_create(
        user=None,
        dataset=dataset,
        target_kind="openai_chat",
        target_config={"base_url": fake.base_url, "model": "fake", **config},
        scorers=["exact_match", judge],
        launch=False,
    )
    Run.objects.filter(pk=run.pk).update(
        status=RunStatus.COMPLETED, finished_at=timezone.now()
    )
    run.refresh_from_db()
    return run


def _answered(run: Run, index: int, *, passed: bool, finish: str = "stop") -> Result:
    item = Item.objects.get(dataset=run.dataset, index=index)
    now = timezone.now()
    result = Result.objects.create(
        run=run,
        item=item,
        item_index=index,
        epoch=0,
        status=Result.Status.SUCCEEDED,
        output=ANSWER,
        attempts=[{"number": 1, "outcome": "ok", "finish_reason": finish}],
        started_at=now,
        finished_at=now,
    )
    Score.objects.create(
        result=result, scorer="exact_match", value=float(passed), passed=passed
    )
    Score.objects.create(
        result=result, scorer="judge", value=1.0, passed=True, reason=JUDGE_REASON
    )
    return result


@pytest.fixture
def chat_run(word_problems: Dataset, fake_openai: FakeOpenAIServer) -> Run:
    run = _chat_run(
        word_problems,
        fake_openai,
        system_prompt="Solve it.\nEnd with '#### <number>'.",
        max_tokens=64,
    )
    for index in range(4):
        _answered(
            run, index, passed=index % 2 == 1, finish="length" if index == 3 else "stop"
        )
    return run


def _page(client: Client, name: str, *args: int, query: str = "") -> str:
    response = client.get(reverse(f"runs:{name}", args=args) + query)
    assert response.status_code == 200
    return response.content.decode()


# -- the results table --------------------------------------------------------------


def test_the_results_table_shows_the_question_the_answer_and_the_outputs_end(
    bob_client: Client, chat_run: Run
) -> None:
    page = _page(bob_client, "run_detail", chat_run.pk)

    table = page[page.index('id="results"') :]
    assert "Problem 0: how many clips?" in table
    assert '<td class="cell-text result-expected" title="72">72</td>' in table
    # The end of the output, where the scored number is, not its first words.
    assert "#### 72</td>" in table
    assert "…" + ANSWER[-79:] in html.unescape(table)
    assert 'title="' + html.escape(ANSWER.strip()) in table


def test_a_truncated_output_is_marked_in_the_results_table(
    bob_client: Client, chat_run: Run
) -> None:
    page = _page(bob_client, "run_detail", chat_run.pk)

    rows = re.findall(r"<tr data-result-id=.*?</tr>", page, re.S)
    marked = [row for row in rows if 'title="Cut at max_tokens">truncated' in row]
    assert len(marked) == 1 and ">3</a>" in marked[0]


# -- the comparison's items ---------------------------------------------------------


def test_the_comparison_items_show_the_question_and_the_outputs_end(
    bob_client: Client, word_problems: Dataset, fake_openai: FakeOpenAIServer
) -> None:
    baseline, candidate = (_chat_run(word_problems, fake_openai) for _ in range(2))
    for index in range(4):
        _answered(baseline, index, passed=True)
        _answered(candidate, index, passed=index != 2)
    query = f"?baseline={baseline.pk}&candidates={candidate.pk}&scorer=exact_match"

    page = _page(bob_client, "compare", query=query)

    items = page[page.index('id="item-table"') :]
    assert (
        '<td class="cell-text item-input" title="Problem 2: how many clips?">' in items
    )
    assert '<td class="cell-text item-expected" title="72">72</td>' in items
    assert "#### 72</a>" in items


# -- a result's page ----------------------------------------------------------------


def test_the_result_page_shows_the_request_as_the_target_builds_it(
    bob_client: Client, chat_run: Run
) -> None:
    result = Result.objects.get(run=chat_run, item_index=1)

    page = _page(bob_client, "result_detail", chat_run.pk, result.pk)

    body = re.search(r'<pre class="json" id="request-body">(.*?)</pre>', page, re.S)
    assert body is not None
    assert json.loads(html.unescape(body.group(1))) == {
        "model": "fake",
        "messages": [
            {"role": "system", "content": "Solve it.\nEnd with '#### <number>'."},
            {"role": "user", "content": "Problem 1: how many clips?"},
        ],
        "max_tokens": 64,
    }


def test_the_result_page_shows_the_finish_reason_and_marks_a_cut_answer(
    bob_client: Client, chat_run: Run
) -> None:
    whole = Result.objects.get(run=chat_run, item_index=0)
    cut = Result.objects.get(run=chat_run, item_index=3)

    whole_page = _page(bob_client, "result_detail", chat_run.pk, whole.pk)
    cut_page = _page(bob_client, "result_detail", chat_run.pk, cut.pk)

    assert '<dd id="finish-reason"><code>stop</code></dd>' in whole_page
    assert "truncated at max_tokens" not in whole_page
    assert '<dd id="finish-reason"><code>length</code>' in cut_page
    assert "truncated at max_tokens" in cut_page


def test_the_result_page_steps_through_the_results_of_the_filtered_table(
    bob_client: Client, chat_run: Run
) -> None:
    ids = dict(Result.objects.filter(run=chat_run).values_list("item_index", "pk"))
    failed = "?scorer=exact_match&verdict=failed"  # items 0 and 2

    listed = _page(bob_client, "run_detail", chat_run.pk, query=failed)
    first = _page(bob_client, "result_detail", chat_run.pk, ids[0], query=failed)
    last = _page(bob_client, "result_detail", chat_run.pk, ids[2], query=failed)
    plain = _page(bob_client, "result_detail", chat_run.pk, ids[1])

    detail = reverse("runs:result_detail", args=[chat_run.pk, ids[0]])
    assert f'href="{detail}?scorer=exact_match&amp;verdict=failed"' in listed
    to_last = reverse("runs:result_detail", args=[chat_run.pk, ids[2]])
    assert (
        f'id="result-next" href="{to_last}?scorer=exact_match&amp;verdict=failed"'
        in first
    )
    assert 'id="result-previous"' not in first
    to_first = reverse("runs:result_detail", args=[chat_run.pk, ids[0]])
    assert f'id="result-previous" href="{to_first}?scorer' in last
    assert 'id="result-next"' not in last
    # Without filters: every result, in dataset order.
    assert f'href="{to_first}"' in plain
    assert reverse("runs:result_detail", args=[chat_run.pk, ids[2]]) in plain


def test_the_result_page_shows_the_judges_prompt_and_reason_with_line_breaks(
    bob_client: Client, chat_run: Run
) -> None:
    result = Result.objects.get(run=chat_run, item_index=1)

    page = _page(bob_client, "result_detail", chat_run.pk, result.pk)

    assert f'<div class="pre-wrap">{html.escape(JUDGE_REASON)}</div>' in page
    prompt = page[page.index('<details class="judge-prompt" data-scorer="judge">') :]
    prompt = html.unescape(prompt[: prompt.index("</details>")])
    assert "Problem 1: how many clips?" in prompt
    assert "#### 72" in prompt  # the output judged
    assert "Verdict: PASS" in prompt  # the format asked for


def test_the_result_page_is_not_found_for_an_outsider(
    mallory_client: Client, chat_run: Run
) -> None:
    result = Result.objects.filter(run=chat_run).first()
    assert result is not None

    response = mallory_client.get(
        reverse("runs:result_detail", args=[chat_run.pk, result.pk])
    )

    assert response.status_code == 404


def test_the_result_page_of_a_run_without_steps_reads_no_steps_nor_the_run_again(
    bob_client: Client, chat_run: Run
) -> None:
    result = Result.objects.get(run=chat_run, item_index=1)
    _page(bob_client, "result_detail", chat_run.pk, result.pk)  # caches filled

    with CaptureQueriesContext(connection) as queries:
        page = _page(bob_client, "result_detail", chat_run.pk, result.pk)

    assert "Problem 1: how many clips?" in page
    statements = [q["sql"] for q in queries]
    assert not [sql for sql in statements if '"runs_step"' in sql]
    assert len([sql for sql in statements if 'FROM "runs_run"' in sql]) == 1


def test_a_second_view_of_a_result_is_the_cached_page_until_its_run_moves(
    bob_client: Client, chat_run: Run
) -> None:
    """A result's page was read and rendered for every request: now once per
    state of its run (its row and scoring passes, which its results_version
    is made of)."""
    result = Result.objects.get(run=chat_run, item_index=1)
    first = _page(bob_client, "result_detail", chat_run.pk, result.pk)

    url = reverse("runs:result_detail", args=(chat_run.pk, result.pk))
    with CaptureQueriesContext(connection) as again:
        cached = bob_client.get(url)
    # Now: the next request empties the connection's log.
    read_again = len(again.captured_queries)
    second = cached.content.decode()
    Score.objects.filter(result=result).update(reason="judged again")
    results_changed(chat_run)  # as a re-score does, in its transaction
    third = _page(bob_client, "result_detail", chat_run.pk, result.pk)

    # No template rendered; read: the session's user, the run's row and its
    # scoring passes.
    assert cached.context is None
    assert 0 < read_again <= 3
    token = re.compile(r"[A-Za-z0-9]{64}")
    assert token.sub("", second) == token.sub("", first)
    assert "judged again" not in first
    assert "judged again" in third
