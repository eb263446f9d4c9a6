"""The llm_judge scorer against a real local server that judges (fake_openai)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User

from runs.errors import ConfigError, InvalidInput
from runs.executor.engine import execute_run
from runs.models import Project, Result, Run, RunStatus, Score
from runs.results.services import run_create
from runs.scorers import build_scorer, clean_scorer_specs
from runs.scorers.llm_judge import LLMJudge
from runs.targets import TargetInput
from runs.testing.fake_judge import judge_reply
from runs.testing.fake_openai import FakeOpenAIServer
from tests.factories import make_dataset, set_bound_secret
from tests.local_http import serve

KEY = "sk-judge-key-0123456789abcdef"
FAST = {"backoff_base_seconds": 0.01, "backoff_max_seconds": 0.05}


def judge(base_url: str, **params: Any) -> dict[str, Any]:
    return {
        "kind": "llm_judge",
        "params": {"base_url": base_url, "model": "fake-judge", **FAST, **params},
    }


def echo_run(
    project: Project,
    items: list[dict[str, Any]],
    scorers: list[Any],
    *,
    user: User | None = None,
    **options: Any,
) -> Run:
    """A run whose output is the item's input (python echo target)."""
    return run_create(
        user=user,
        dataset=make_dataset(project, items),
        target_kind="python",
        target_config={"callable": "runs.targets.examples.echo"},
        scorers=scorers,
        options=options,
        launch=False,
    )


async def run_and_scores(run: Run) -> dict[str, Score]:
    """Execute the run; its scores by item external id."""
    assert await execute_run(run.pk) in (
        RunStatus.COMPLETED,
        RunStatus.COMPLETED_WITH_ERRORS,
    )
    scores = Score.objects.filter(result__run=run).select_related("result__item")
    return {score.result.item.external_id: score async for score in scores}


# -- verdicts ---------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
async def test_judge_passes_a_right_answer_and_fails_a_wrong_one(
    project: Project, fake_openai: FakeOpenAIServer
) -> None:
    items = [
        {"id": "right", "input": "Paris", "expected": "paris."},
        {"id": "wrong", "input": "Lyon", "expected": "Paris"},
        {"id": "unicode", "input": "Zürich ✓", "expected": "zürich ✓"},
    ]
    run = await sync_to_async(echo_run)(project, items, [judge(fake_openai.base_url)])
    scores = await run_and_scores(run)

    assert scores["right"].passed is True
    assert scores["right"].value == 1.0
    # The endpoint takes a schema: the reply is the verdict's JSON object.
    assert json.loads(scores["right"].reason) == {
        "reasoning": "The answer matches the reference.",
        "verdict": "pass",
    }
    assert scores["right"].model == "fake-judge"
    assert scores["right"].prompt_tokens and scores["right"].completion_tokens
    assert scores["right"].cost is None  # the endpoint reports none
    assert scores["wrong"].passed is False
    assert "'Lyon' does not match the reference 'Paris'" in scores["wrong"].reason
    assert scores["unicode"].passed is True
    assert all(score.error == "" for score in scores.values())


@pytest.mark.django_db(transaction=True)
async def test_empty_blank_and_huge_outputs_are_judged(
    project: Project, fake_openai: FakeOpenAIServer
) -> None:
    huge = "Paris " * 50_000
    items = [
        {"id": "empty", "input": "", "expected": "Paris"},
        {"id": "blank", "input": " \n\t ", "expected": "Paris"},
        {"id": "huge", "input": huge, "expected": "Paris"},
        {"id": "json", "input": {"answer": "Paris"}, "expected": "Paris"},
    ]
    run = await sync_to_async(echo_run)(project, items, [judge(fake_openai.base_url)])
    scores = await run_and_scores(run)

    assert {key: score.passed for key, score in scores.items()} == {
        "empty": False,
        "blank": False,
        "huge": False,
        "json": False,
    }
    assert all(score.error == "" for score in scores.values())
    assert scores["huge"].prompt_tokens > 50_000  # the whole output was sent
    assert len(scores["huge"].reason) < 1000


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("params", "right", "wrong"),
    [
        ({"verdict_format": "scale_1_5"}, (5.0, True), (1.0, False)),
        ({"verdict_format": "scale_0_10"}, (10.0, True), (0.0, False)),
        ({"verdict_format": "json"}, (1.0, True), (0.0, False)),
        (
            {
                "verdict_format": "json",
                "json_verdict_key": "decision",
                "json_score_key": "points",
            },
            (1.0, True),
            (0.0, False),
        ),
    ],
)
async def test_judge_reads_each_verdict_format(
    project: Project,
    fake_openai: FakeOpenAIServer,
    params: dict[str, Any],
    right: tuple[float, bool],
    wrong: tuple[float, bool],
) -> None:
    items = [
        {"id": "right", "input": "42", "expected": "42"},
        {"id": "wrong", "input": "41", "expected": "42"},
    ]
    run = await sync_to_async(echo_run)(
        project, items, [judge(fake_openai.base_url, **params)]
    )
    scores = await run_and_scores(run)

    assert (scores["right"].value, scores["right"].passed) == right
    assert (scores["wrong"].value, scores["wrong"].passed) == wrong
    if params["verdict_format"] == "json":
        reply = json.loads(scores["right"].reason)
        assert reply[params.get("json_verdict_key", "verdict")] == "pass"


@pytest.mark.django_db(transaction=True)
async def test_an_unparseable_reply_is_a_scorer_error_keeping_the_reply(
    project: Project, fake_openai: FakeOpenAIServer
) -> None:
    items = [{"id": "1", "input": "Paris [[unparseable]]", "expected": "Paris"}]
    spec = judge(fake_openai.base_url, structured_reply="off")
    run = await sync_to_async(echo_run)(project, items, [spec])
    scores = await run_and_scores(run)

    score = scores["1"]
    assert score.error.startswith('unreadable judge reply: no "Verdict: PASS"')
    assert score.reason == "I would rather not say."
    assert score.value is None and score.passed is None
    assert score.prompt_tokens is not None  # the reply was paid for
    result = await Result.objects.aget(run=run)
    assert result.status == Result.Status.SUCCEEDED  # never a target error
    assert fake_openai.stats.requests == 1  # not retried: it would say the same


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "marker",
    [
        "[[flaky:1]][[flaky_status:503]]",
        "[[flaky:1]][[flaky_status:429]][[retry_after:0]]",
        "[[flaky:2]]",
    ],
)
async def test_a_transient_failure_is_retried_then_judged(
    project: Project, fake_openai: FakeOpenAIServer, marker: str
) -> None:
    items = [{"id": "1", "input": f"Paris {marker}", "expected": "Paris"}]
    run = await sync_to_async(echo_run)(project, items, [judge(fake_openai.base_url)])
    scores = await run_and_scores(run)

    assert scores["1"].passed is True
    assert scores["1"].error == ""
    failures = 2 if "flaky:2" in marker else 1
    assert fake_openai.stats.requests == failures + 1


@pytest.mark.django_db(transaction=True)
async def test_retries_stop_at_max_attempts_with_a_scorer_error(
    project: Project, fake_openai: FakeOpenAIServer
) -> None:
    items = [{"id": "1", "input": "Paris [[status:503]]", "expected": "Paris"}]
    run = await sync_to_async(echo_run)(
        project, items, [judge(fake_openai.base_url, max_attempts=2)]
    )
    scores = await run_and_scores(run)

    assert scores["1"].error == (
        "judge call failed after 2 attempts: HTTP 503 Service Unavailable: "
        "simulated 503"
    )
    assert "simulated 503" in scores["1"].reason  # the body, kept
    assert fake_openai.stats.requests == 2


@pytest.mark.django_db(transaction=True)
async def test_a_permanent_failure_is_not_retried(
    project: Project, alice: User, fake_openai: FakeOpenAIServer
) -> None:
    await sync_to_async(set_bound_secret)(
        project, alice, "JUDGE_KEY", KEY, url=fake_openai.base_url
    )
    items = [{"id": "1", "input": "Paris [[status:401]]", "expected": "Paris"}]
    spec = judge(fake_openai.base_url, api_key_secret="JUDGE_KEY")
    run = await sync_to_async(echo_run)(project, items, [spec], user=alice)
    scores = await run_and_scores(run)

    assert (
        scores["1"].error == "judge call failed: HTTP 401 Unauthorized: simulated 401"
    )
    assert fake_openai.stats.requests == 1
    assert fake_openai.stats.authorization == {f"Bearer {KEY}"}
    result = await Result.objects.aget(run=run)
    assert result.status == Result.Status.SUCCEEDED


@pytest.mark.django_db(transaction=True)
async def test_judge_calls_respect_the_call_limit(
    project: Project, fake_openai: FakeOpenAIServer
) -> None:
    items = [
        {"id": str(i), "input": f"{i} [[latency:60]]", "expected": str(i)}
        for i in range(12)
    ]
    run = await sync_to_async(echo_run)(
        project,
        items,
        [judge(fake_openai.base_url, max_parallel_calls=2)],
        concurrency=12,
    )
    scores = await run_and_scores(run)

    assert [scores[str(i)].passed for i in range(12)] == [True] * 12
    assert fake_openai.stats.requests == 12
    assert fake_openai.stats.max_in_flight == 2


class _HeaderEcho(BaseHTTPRequestHandler):
    """A judge that answers with the Authorization header it got, or fails with it."""

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        sent = self.headers.get("Authorization")
        if "Answer:\nfail" in json.loads(body)["messages"][-1]["content"]:
            status, payload = 400, {"error": {"message": f"bad key {sent}"}}
        else:
            status = 200
            payload = {"choices": [{"message": {"content": f"you sent {sent}"}}]}
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def header_echo() -> Iterator[str]:
    with serve(_HeaderEcho) as base_url:
        yield base_url


@pytest.mark.django_db(transaction=True)
async def test_the_key_never_reaches_a_reason_or_an_error(
    project: Project, alice: User, header_echo: str
) -> None:
    await sync_to_async(set_bound_secret)(
        project, alice, "JUDGE_KEY", KEY, url=header_echo
    )
    items = [
        {"id": "echo", "input": "Paris", "expected": "Paris"},
        {"id": "fail", "input": "fail", "expected": "Paris"},
    ]
    spec = judge(header_echo, api_key_secret="JUDGE_KEY")
    run = await sync_to_async(echo_run)(project, items, [spec], user=alice)
    scores = await run_and_scores(run)

    assert scores["echo"].reason == "you sent Bearer [redacted secret api_key]"
    assert scores["echo"].error.startswith("unreadable judge reply")
    assert "[redacted secret api_key]" in scores["fail"].error + scores["fail"].reason
    stored = [(s.reason, s.error) for s in scores.values()]
    await run.arefresh_from_db()
    assert KEY not in str([stored, run.scorers, run.error])


# -- configuration ----------------------------------------------------------------


@pytest.mark.django_db
def test_a_template_field_that_does_not_exist_is_refused_at_run_creation(
    project: Project, fake_openai: FakeOpenAIServer
) -> None:
    spec = judge(fake_openai.base_url, prompt_template="Grade {output} for {question}")
    with pytest.raises(ConfigError) as caught:
        echo_run(project, [{"input": "a", "expected": "a"}], [spec])
    assert caught.value.field == "scorers[0].params.prompt_template"
    assert "{question}" in caught.value.message
    assert not Run.objects.exists()


@pytest.mark.parametrize(
    ("params", "field", "message"),
    [
        ({"prompt_template": "Grade {input}"}, "prompt_template", "{output}"),
        ({"prompt_template": "{output} {id.x}"}, "prompt_template", "only input"),
        ({"verdict_format": "stars"}, "verdict_format", "must be one of"),
        (
            {"verdict_format": "scale_1_5", "pass_threshold": 7},
            "pass_threshold",
            "between 1 and 5",
        ),
        ({"max_parallel_calls": 0}, "max_parallel_calls", "between 1 and 1024"),
        ({"api_key": "sk-x"}, "api_key", "never stored"),
        ({"base_url": "http://169.254.169.254/v1"}, "base_url", ""),
    ],
)
def test_bad_parameters_name_the_field(
    params: dict[str, Any], field: str, message: str
) -> None:
    params = {"base_url": "http://127.0.0.1:9/v1", **params}
    spec = judge(params.pop("base_url"), **params)
    with pytest.raises(ConfigError) as caught:
        clean_scorer_specs([spec])
    assert caught.value.field == f"scorers[0].params.{field}"
    assert message in caught.value.message


def test_a_stored_config_naming_the_former_call_limit_still_loads() -> None:
    """Runs stored (and API clients written) before the rename say
    ``concurrency``: it is read as max_parallel_calls, with a warning."""
    stored = {
        "name": "llm_judge",
        "kind": "llm_judge",
        "params": {"base_url": "http://127.0.0.1:9/v1", "model": "m", "concurrency": 3},
    }
    with pytest.warns(DeprecationWarning, match="'concurrency' is deprecated"):
        scorer = build_scorer(stored)
    assert scorer.params.max_parallel_calls == 3
    with pytest.warns(DeprecationWarning, match="max_parallel_calls"):
        [cleaned] = clean_scorer_specs([stored])
    assert cleaned["params"]["max_parallel_calls"] == 3
    assert "concurrency" not in cleaned["params"]


def test_the_former_and_the_new_call_limit_together_must_agree() -> None:
    spec = judge("http://127.0.0.1:9/v1", concurrency=3, max_parallel_calls=5)
    with pytest.raises(ConfigError) as caught:
        clean_scorer_specs([spec])
    assert caught.value.field == "scorers[0].params.concurrency"
    assert "former name of max_parallel_calls" in caught.value.message


@pytest.mark.django_db
def test_a_missing_judge_secret_is_named_at_run_creation(
    project: Project, fake_openai: FakeOpenAIServer
) -> None:
    spec = judge(fake_openai.base_url, api_key_secret="NOT_SET")
    with pytest.raises(InvalidInput) as caught:
        echo_run(project, [{"input": "a", "expected": "a"}], [spec])
    assert caught.value.field == "scorers[0].params.api_key_secret"
    assert "project secret NOT_SET may not be sent to" in caught.value.message


@pytest.mark.django_db(transaction=True)
async def test_a_metadata_field_an_item_lacks_is_that_items_scorer_error(
    project: Project, fake_openai: FakeOpenAIServer
) -> None:
    items = [
        {"id": "has", "input": "x", "metadata": {"rubric": "x"}},
        {"id": "lacks", "input": "x"},
    ]
    template = "Grade it.\n\nReference:\n{metadata.rubric}\n\nAnswer:\n{output}"
    run = await sync_to_async(echo_run)(
        project, items, [judge(fake_openai.base_url, prompt_template=template)]
    )
    scores = await run_and_scores(run)

    assert scores["has"].passed is True
    assert scores["lacks"].error == (
        "the judge's template names {metadata.rubric}, which item 'lacks' does not have"
    )


# -- reading replies (no server) -------------------------------------------------------


def _judge(**params: Any) -> LLMJudge:
    cleaned = LLMJudge.clean(
        {"base_url": "http://127.0.0.1:9/v1", "model": "m", **params}
    )
    return LLMJudge("judge", LLMJudge.Params.model_validate(cleaned))


@pytest.mark.parametrize(
    ("reply", "verdict"),
    [
        ("Looks right.\nVerdict: PASS", (1.0, True)),
        ("**Verdict:** fail", (0.0, False)),
        ("verdict = Correct", (1.0, True)),
        ("PASS", (1.0, True)),
        ("  no.  ", (0.0, False)),
        ("Verdict: FAIL\n...on reflection, Verdict: PASS", (1.0, True)),
    ],
)
def test_pass_fail_replies(reply: str, verdict: tuple[float, bool]) -> None:
    assert _judge().verdict(reply) == verdict


@pytest.mark.parametrize(
    ("fmt", "reply", "verdict"),
    [
        ("scale_1_5", "Good.\nScore: 4", (4.0, True)),
        ("scale_1_5", "Rating: 3/5", (3.0, False)),
        ("scale_1_5", "5", (5.0, True)),
        ("scale_0_10", "score: 6.5", (6.5, False)),
        ("scale_0_10", "Score: 7", (7.0, True)),
        ("json", '```json\n{"verdict": "PASS", "score": 0.2}\n```', (0.2, True)),
        ("json", 'Sure: {"score": 0.75}', (0.75, True)),
        ("json", '{"verdict": false}', (0.0, False)),
    ],
)
def test_scored_replies(fmt: str, reply: str, verdict: tuple[float, bool]) -> None:
    assert _judge(verdict_format=fmt).verdict(reply) == verdict


@pytest.mark.parametrize(
    ("fmt", "reply", "message"),
    [
        ("pass_fail", "", "the reply is empty"),
        ("pass_fail", "   \n ", "the reply is empty"),
        ("pass_fail", "It depends.", 'no "Verdict: PASS"'),
        ("scale_1_5", "Score: 9", "outside 1 to 5"),
        ("scale_0_10", "ten out of ten", 'no "Score: N"'),
        ("json", "{not json", "no JSON object"),
        ("json", '{"verdict": "maybe"}', "not pass or fail"),
        ("json", '{"score": "high"}', "neither 'verdict' nor a numeric 'score'"),
        ("json", "[1, 2]", "no JSON object"),
    ],
)
def test_unreadable_replies(fmt: str, reply: str, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        _judge(verdict_format=fmt).verdict(reply)
    assert message in str(caught.value)


def test_a_huge_reply_is_read_and_its_verdict_found() -> None:
    reply = "blah { " * 200_000 + "\nVerdict: PASS"
    assert _judge().verdict(reply) == (1.0, True)
    assert _judge(verdict_format="json").read_json('{"verdict": "pass"}') == (1.0, True)


def test_the_fake_judge_follows_its_documented_convention() -> None:
    prompt = "Grade it.\n\nReference answer:\n Paris \n\nAnswer:\nparis.\n\n"
    assert judge_reply(prompt).endswith("Verdict: PASS")
    assert judge_reply(prompt + "from 1 to 5").endswith("Score: 5")
    assert judge_reply("Answer:\n\n").endswith("Verdict: FAIL")


def test_the_template_fills_item_fields_and_the_output() -> None:
    item = TargetInput(
        index=3,
        external_id="q3",
        input={"question": "Capital?"},
        expected=None,
        metadata={"topic": "géographie"},
    )
    template = "{input.question} {id} {index} {metadata.topic} {expected} {output}"
    messages = _judge(prompt_template=template).messages("Paris", item)
    assert messages[-1] == {
        "role": "user",
        "content": "Capital? q3 3 géographie null Paris",
    }


# -- cost ---------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
async def test_a_judges_tokens_are_priced_into_its_score_the_result_and_the_run(
    project: Project, fake_openai: FakeOpenAIServer, settings
) -> None:
    settings.EVALSITE_PRICES = {"fake-judge": (1.0, 2.0)}  # USD per 1M tokens
    items = [
        {"id": "right", "input": "Paris", "expected": "Paris"},
        {"id": "wrong", "input": "Lyon", "expected": "Paris"},
    ]
    run = await sync_to_async(echo_run)(project, items, [judge(fake_openai.base_url)])
    scores = await run_and_scores(run)

    for score in scores.values():
        expected = (score.prompt_tokens * 1.0 + score.completion_tokens * 2.0) / 1e6
        assert score.cost == pytest.approx(expected)
        result = await Result.objects.aget(pk=score.result_id)
        # The echo target uses no tokens: the result's cost is its judge's.
        assert result.cost == pytest.approx(expected)
    await run.arefresh_from_db()
    assert run.cost == pytest.approx(sum(s.cost for s in scores.values()))
    assert run.unpriced == 0


@pytest.mark.django_db(transaction=True)
async def test_a_judge_without_a_price_leaves_the_results_cost_unknown(
    project: Project, fake_openai: FakeOpenAIServer, settings
) -> None:
    settings.EVALSITE_PRICES = {}
    items = [{"id": "right", "input": "Paris", "expected": "Paris"}]
    run = await sync_to_async(echo_run)(project, items, [judge(fake_openai.base_url)])
    scores = await run_and_scores(run)

    assert scores["right"].prompt_tokens and scores["right"].cost is None
    result = await Result.objects.aget(pk=scores["right"].result_id)
    assert result.cost is None
    await run.arefresh_from_db()
    assert run.unpriced == 1
