"""A key an endpoint echoes, in whatever form, is stored and shown nowhere:
not in a result's output, attempt log (raw bodies, models), error, nor in a
judge's reason, nor in the run's export."""

from __future__ import annotations

import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User

from runs.executor.engine import execute_run
from runs.executor.items import RAW_BODY_LIMIT
from runs.executor.rescore import PassExecution, execute_scoring_pass
from runs.models import Project, Result, Run, RunStatus, Score, ScoringPass
from runs.rescore.services import run_rescore
from runs.results.services import run_create
from runs.testing.fake_openai import FakeOpenAIServer
from runs.testing.key_forms import FORMS, echoed, leaks
from tests.factories import make_dataset
from tests.local_http import serve
from tests.stored_texts import exported_text, store_secret, stored_text

TARGET_KEY = "sk-target-Qx7vB2mN9pL4wZ8c"
JUDGE_KEY = "sk-judge-Hf3kT6yR1sD5gJ0a"
ECHO = "hi [[echo_key:exact]]"
FAST = {"backoff_base_seconds": 0.01, "backoff_max_seconds": 0.05}


def openai_run(
    project: Project, user: User, base_url: str, items: list[dict[str, Any]]
) -> Run:
    """A run of the chat target with TARGET_KEY, judged with JUDGE_KEY."""
    store_secret(project, user, "TARGET", TARGET_KEY, url=base_url)
    store_secret(project, user, "JUDGE", JUDGE_KEY, url=base_url)
    judge = {
        "kind": "llm_judge",
        "params": {
            "base_url": base_url,
            "model": "fake-judge",
            "api_key_secret": "JUDGE",
            "max_attempts": 1,
            **FAST,
        },
    }
    return run_create(
        user=user,
        dataset=make_dataset(project, items),
        target_kind="openai_chat",
        target_config={
            "base_url": base_url,
            "model": "fake",
            "api_key_secret": "TARGET",
        },
        scorers=["exact_match", judge],
        options={"max_attempts": 1, **FAST},
        launch=False,
    )


@pytest.mark.django_db(transaction=True)
async def test_a_key_echoed_in_any_form_is_stored_and_exported_nowhere(
    alice: User, project: Project, fake_openai: FakeOpenAIServer
) -> None:
    items: list[dict[str, Any]] = []
    for form in FORMS:
        # The answer, a failed call's error and body, a malformed answer's
        # body, a tool call: each echoes.
        items += [
            {"id": f"{form}-answer", "input": f"hi [[echo_key:{form}]]"},
            {"id": f"{form}-error", "input": f"[[status:401]][[echo_key:{form}]]"},
            {"id": f"{form}-tool", "input": f"[[tool:find]][[echo_key:{form}]]"},
            {"id": f"{form}-bad", "input": f"[[malformed]][[echo_key:{form}]]"},
        ]
    for item in items:
        item["expected"] = "hi"
    run = await sync_to_async(openai_run)(project, alice, fake_openai.base_url, items)

    assert await execute_run(run.pk) == RunStatus.COMPLETED_WITH_ERRORS

    # The server did echo both keys, in every form, in its answers.
    assert fake_openai.stats.authorization == {
        f"Bearer {TARGET_KEY}",
        f"Bearer {JUDGE_KEY}",
    }
    stored = await sync_to_async(stored_text)(run)
    exported = await sync_to_async(exported_text)(run)
    for key in (TARGET_KEY, JUDGE_KEY):
        assert leaks(stored, key) == []
        assert leaks(exported, key) == []
    answer = await Result.objects.aget(run=run, item__external_id="spaced-answer")
    assert answer.output.startswith("hi (your key: [redacted secret api_key]")
    judged = await Score.objects.aget(result=answer, scorer="llm_judge")
    assert "[redacted secret api_key]" in judged.reason
    assert stored.count("[redacted secret api_key]") >= 4 * len(FORMS)


class _EscapingAgent(BaseHTTPRequestHandler):
    """An agent that answers with its request's headers, in JSON whose every
    character of the token is written as a \\u escape."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        token = self.headers["X-Agent-Key"]
        body = json.dumps({"answer": "ok", "seen": f"token {token}"})
        body = body.replace(token, echoed(token, "unicode"))
        data = body.encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def escaping_agent() -> Iterator[str]:
    with serve(_EscapingAgent) as url:
        yield url


@pytest.mark.django_db(transaction=True)
async def test_an_http_target_echoing_the_key_in_json_escapes_stores_none(
    alice: User, project: Project, escaping_agent: str
) -> None:
    def create() -> Run:
        store_secret(project, alice, "AGENT", TARGET_KEY, url=escaping_agent)
        return run_create(
            user=alice,
            dataset=make_dataset(
                project, [{"id": "1", "input": "hi", "expected": "ok"}]
            ),
            target_kind="http",
            target_config={
                "url": escaping_agent,
                "auth_secret": "AGENT",
                "auth_header": "X-Agent-Key",
                "auth_prefix": "",
            },
            scorers=["exact_match"],
            options={"max_attempts": 1},
            launch=False,
        )

    run = await sync_to_async(create)()
    assert await execute_run(run.pk) == RunStatus.COMPLETED
    result = await Result.objects.aget(run=run)
    assert result.output == {"answer": "ok", "seen": "token [redacted secret auth]"}
    stored = await sync_to_async(stored_text)(run)
    assert leaks(stored, TARGET_KEY) == []
    assert leaks(await sync_to_async(exported_text)(run), TARGET_KEY) == []


@pytest.mark.django_db(transaction=True)
async def test_a_scoring_pass_stores_no_form_of_its_judges_key(
    alice: User, project: Project, fake_openai: FakeOpenAIServer
) -> None:
    def create() -> Run:
        store_secret(project, alice, "JUDGE", JUDGE_KEY, url=fake_openai.base_url)
        items = [
            {"id": form, "input": f"hi [[echo_key:{form}]]", "expected": "hi"}
            for form in FORMS
        ]
        return run_create(
            user=alice,
            dataset=make_dataset(project, items),
            target_kind="python",
            target_config={"callable": "runs.targets.examples.echo"},
            scorers=["exact_match"],
            launch=False,
        )

    run = await sync_to_async(create)()
    assert await execute_run(run.pk) == RunStatus.COMPLETED
    judge = {
        "kind": "llm_judge",
        "params": {
            "base_url": fake_openai.base_url,
            "model": "fake-judge",
            "api_key_secret": "JUDGE",
        },
    }
    plan = await sync_to_async(run_rescore)(
        run=run, user=alice, scorers=[judge], launch=False
    )
    assert plan.scoring_pass is not None

    await execute_scoring_pass(plan.scoring_pass.pk)

    assert fake_openai.stats.authorization == {f"Bearer {JUDGE_KEY}"}
    assert leaks(await sync_to_async(stored_text)(run), JUDGE_KEY) == []
    reasons = [s.reason async for s in Score.objects.filter(scorer="llm_judge")]
    assert len(reasons) == len(FORMS)
    assert all(r.endswith("[redacted secret api_key])") for r in reasons)


@pytest.mark.django_db(transaction=True)
async def test_a_key_straddling_the_cut_of_a_long_raw_answer_is_stored_in_no_part(
    alice: User, project: Project, fake_openai: FakeOpenAIServer
) -> None:
    # The answer echoes the input, then the key: inputs a few characters
    # apart put the key across the point where the raw answer is cut, for
    # one of them after all but a few of its characters.
    limit = RAW_BODY_LIMIT
    items = [
        {"id": f"pad-{size}", "input": "a" * size + " [[echo_key:exact]]"}
        for size in range(limit - 300, limit, 5)
    ]
    for item in items:
        item["expected"] = "hi"
    run = await sync_to_async(openai_run)(project, alice, fake_openai.base_url, items)

    await execute_run(run.pk)

    stored = await sync_to_async(stored_text)(run)
    assert fake_openai.stats.authorization >= {f"Bearer {TARGET_KEY}"}
    assert TARGET_KEY[: len(TARGET_KEY) // 2] not in stored
    raw = await sync_to_async(list)(
        Result.objects.filter(run=run).values_list("attempts", flat=True)
    )
    assert max(len(attempts[0]["raw_body"]) for attempts in raw) == limit


@pytest.mark.django_db(transaction=True)
async def test_a_key_echoed_at_the_end_of_a_long_model_name_is_stored_in_no_part(
    alice: User, project: Project, fake_openai: FakeOpenAIServer
) -> None:
    # The endpoint reports the model it was asked for, then the key: a model
    # name this long puts the key across where a stored model name is cut.
    def create() -> Run:
        items = [{"id": "a", "input": ECHO, "expected": "hi"}]
        run = openai_run(project, alice, fake_openai.base_url, items)
        run.target_config["model"] = "m" * 180
        run.scorers[-1]["params"]["model"] = "j" * 180
        run.save(update_fields=["target_config", "scorers"])
        return run

    run = await sync_to_async(create)()

    await execute_run(run.pk)

    stored = await sync_to_async(stored_text)(run)
    assert fake_openai.stats.authorization == {
        f"Bearer {TARGET_KEY}",
        f"Bearer {JUDGE_KEY}",
    }
    for key in (TARGET_KEY, JUDGE_KEY):
        assert key[: len(key) // 2] not in stored


class _RefusingEcho(BaseHTTPRequestHandler):
    """An endpoint that refuses every call (400) with an error that echoes its
    key after as many characters as the request's input names: in the error's
    message (``message:N``) or in the error body after it (``body:N``)."""

    def do_POST(self) -> None:
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        where, _, size = request["messages"][-1]["content"].partition(":")
        key = self.headers["Authorization"].removeprefix("Bearer ")
        if where == "message":
            error = {"error": {"message": "m" * int(size) + key}}
        else:
            error = {"error": {"message": "refused"}, "pad": "b" * int(size) + key}
        data = json.dumps(error).encode()
        self.send_response(400)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.mark.django_db(transaction=True)
async def test_a_key_straddling_the_cut_of_an_error_is_stored_in_no_part(
    alice: User, project: Project
) -> None:
    # The error's message is cut at 300 characters and its body at 4,096:
    # paddings a few characters apart put the key across each cut, for some
    # of them after all but a few of its characters.
    message = [f"message:{size}" for size in range(300 - 40, 300, 3)]
    body = [f"body:{size}" for size in range(4096 - 100, 4096 - 20, 3)]
    items = [{"id": t, "input": t, "expected": "-"} for t in message + body]

    with serve(_RefusingEcho) as url:

        def create() -> Run:
            store_secret(project, alice, "TARGET", TARGET_KEY, url=url)
            return run_create(
                user=alice,
                dataset=make_dataset(project, items),
                target_kind="openai_chat",
                target_config={
                    "base_url": url,
                    "model": "fake",
                    "api_key_secret": "TARGET",
                },
                scorers=["exact_match"],
                options={"max_attempts": 1},
                launch=False,
            )

        run = await sync_to_async(create)()
        assert await execute_run(run.pk) == RunStatus.FAILED

    stored = await sync_to_async(stored_text)(run)
    assert await Result.objects.filter(run=run, status="failed").acount() == len(items)
    # Every item's error was cut inside the key: no part of it of more than
    # three characters is left.
    for part in (TARGET_KEY[:i] for i in range(4, len(TARGET_KEY))):
        assert part not in stored, part
    assert leaks(await sync_to_async(exported_text)(run), TARGET_KEY) == []


@pytest.mark.django_db(transaction=True)
async def test_a_scoring_pass_s_own_error_is_stored_with_no_key(
    alice: User,
    project: Project,
    fake_openai: FakeOpenAIServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def create() -> Run:
        store_secret(project, alice, "JUDGE", JUDGE_KEY, url=fake_openai.base_url)
        return run_create(
            user=alice,
            dataset=make_dataset(
                project, [{"id": "1", "input": "hi", "expected": "hi"}]
            ),
            target_kind="python",
            target_config={"callable": "runs.targets.examples.echo"},
            scorers=["exact_match"],
            launch=False,
        )

    run = await sync_to_async(create)()
    await execute_run(run.pk)
    judge = {
        "kind": "llm_judge",
        "params": {
            "base_url": fake_openai.base_url,
            "model": "fake-judge",
            "api_key_secret": "JUDGE",
        },
    }
    plan = await sync_to_async(run_rescore)(
        run=run, user=alice, scorers=[judge], launch=False
    )
    assert plan.scoring_pass is not None

    async def fail(self: PassExecution) -> None:
        # An executor error that quotes what a judge's reply held.
        raise RuntimeError(f"could not read the reply {echoed(JUDGE_KEY, 'hex')}")

    monkeypatch.setattr(PassExecution, "score_all", fail)
    await execute_scoring_pass(plan.scoring_pass.pk)

    scoring_pass = await ScoringPass.objects.aget(pk=plan.scoring_pass.pk)
    assert scoring_pass.error.startswith("RuntimeError: could not read the reply")
    assert leaks(scoring_pass.error, JUDGE_KEY) == []
