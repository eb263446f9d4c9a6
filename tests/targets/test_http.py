"""The http target against a real local agent: templated bodies, secret headers,
output paths, status classification, suspended agents and the network policy."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from runs.analysis.clusters import run_clusters
from runs.analysis.summary import run_summary
from runs.errors import ConfigError
from runs.executor.engine import execute_run
from runs.models import ErrorKind, Project, Result, Run, RunStatus, Target
from runs.results.selectors import ResultFilters, result_filter, result_request
from runs.results.services import run_create
from runs.secrets.destinations import Destination
from runs.targets import TargetError, TargetInput, build_target, clean_target_config
from runs.targets.http import HttpTarget
from runs.targets.templating import render_json
from tests.factories import make_dataset, set_bound_secret
from tests.local_http import serve
from tests.stored_texts import store_secret
from tests.targets.agent_server import AgentHandler, fresh_handler

TOKEN = "agent-token-0123456789abcdef"
FAST = {"backoff_base_seconds": 0.01, "backoff_max_seconds": 0.05}


@pytest.fixture
def agent() -> Iterator[tuple[str, type[AgentHandler]]]:
    handler = fresh_handler()
    with serve(handler) as base_url:
        yield f"{base_url}/agent", handler


def item(input: Any = "2+2?", **metadata: Any) -> TargetInput:
    return TargetInput(
        index=3, external_id="q3", input=input, expected="4", metadata=metadata
    )


async def generate(config: dict[str, Any], the_item: TargetInput, **kwargs: Any):
    target = build_target("http", clean_target_config("http", config), **kwargs)
    try:
        return await target.generate(the_item)
    finally:
        await target.aclose()


async def failure(config: dict[str, Any], the_item: TargetInput) -> TargetError:
    with pytest.raises(TargetError) as caught:
        await generate(config, the_item)
    return caught.value


# -- templating ------------------------------------------------------------------


def test_a_whole_placeholder_keeps_its_json_type():
    template = {
        "n": "{metadata.n}",
        "tags": "{metadata.tags}",
        "nested": {"list": ["{index}", "{expected}"]},
        "none": "{metadata.nothing}",
    }
    fields = {"n": 7, "tags": ["a", "b"], "nothing": None}
    value = render_json(template, _fields(item(**fields)), item(), what="body")
    assert value == {
        "n": 7,
        "tags": ["a", "b"],
        "nested": {"list": [3, "4"]},
        "none": None,
    }


def test_a_placeholder_inside_text_becomes_text_and_unicode_survives():
    the_item = item("Ça fait combien, 2+2 ? 🤔", n=7, tags=["x"])
    template = {"q": "Q: {input} n={metadata.n} tags={metadata.tags}", "x": 1.5}
    value = render_json(template, _fields(the_item), the_item, what="body")
    assert value == {"q": 'Q: Ça fait combien, 2+2 ? 🤔 n=7 tags=["x"]', "x": 1.5}


def test_doubled_braces_are_literal_braces():
    value = render_json("{{input}} is {input}", _fields(item("x")), item(), what="b")
    assert value == "{input} is x"


def test_list_indices_and_input_keys_can_be_named():
    the_item = item({"question": "why?", "choices": ["a", "b"]})
    value = render_json("{input.choices.1}", _fields(the_item), the_item, what="body")
    assert value == "b"


def test_a_missing_item_field_is_a_permanent_error_naming_it():
    with pytest.raises(TargetError, match=r"\{metadata\.topic\}") as caught:
        render_json({"t": "{metadata.topic}"}, _fields(item()), item(), what="body")
    assert caught.value.kind == ErrorKind.PERMANENT
    assert "q3" in caught.value.message


def test_an_unknown_field_is_refused_when_the_target_is_saved(agent):
    url, _ = agent
    with pytest.raises(ConfigError) as caught:
        clean_target_config("http", {"url": url, "body": {"q": ["{question}"]}})
    assert caught.value.field == "config.body.q.0"
    assert "{question}" in caught.value.message


def test_attribute_access_is_not_a_placeholder():
    with pytest.raises(TargetError):
        render_json("{input.__class__}", _fields(item("x")), item("x"), what="body")


def _fields(the_item: TargetInput) -> dict[str, Any]:
    from runs.targets.templating import item_fields

    return item_fields(the_item)


# -- configuration -----------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "field"),
    [
        ({"method": "GET", "body": {"q": "{input}"}}, "config.body"),
        ({"headers": {"Authorization": "Bearer x"}}, "config.headers.Authorization"),
        ({"headers": {"X-Bad": "é"}}, "config.headers.X-Bad"),
        ({"status_field": "status"}, "config.suspended_values"),
        ({"output_path": "a..b"}, "config.output_path"),
        ({"response_type": "text", "output_path": "a"}, "config.output_path"),
        ({"auth": "secret-value"}, "config.auth"),
        ({"url": "http://169.254.169.254/latest"}, "config.url"),
        ({"method": "TRACE"}, "config.method"),
    ],
)
def test_bad_configurations_name_the_field(agent, config, field):
    url, _ = agent
    with pytest.raises(ConfigError) as caught:
        clean_target_config("http", {"url": url, **config})
    assert caught.value.field == field


def test_post_gets_a_default_body_and_get_none(agent):
    url, _ = agent
    assert clean_target_config("http", {"url": url})["body"] == {"input": "{input}"}
    assert "body" not in clean_target_config("http", {"url": url, "method": "get"})


# -- requests and outputs ----------------------------------------------------


async def test_the_templated_body_reaches_the_agent_with_types_kept(agent):
    url, handler = agent
    body = {"q": "{input}", "n": "{metadata.n}", "id": "{external_id}"}
    answer = await generate(
        {"url": url, "body": body, "output_path": "result.answer"},
        item("déjà vu?", n=2),
    )
    assert handler.requests[0]["body"] == {"q": "déjà vu?", "n": 2, "id": "q3"}
    assert handler.requests[0]["method"] == "POST"
    assert answer.output == {"q": "déjà vu?", "n": 2, "id": "q3"}
    assert answer.http_status == 200


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("result.keys.1", "b"),
        ("choices.0.message.content", "from a list"),
        ("status", "done"),
    ],
)
async def test_the_output_is_read_by_a_dotted_path(agent, path, expected):
    url, _ = agent
    answer = await generate({"url": url, "output_path": path}, item())
    assert answer.output == expected


async def test_an_empty_path_gives_the_whole_response(agent):
    url, _ = agent
    answer = await generate({"url": url}, item())
    assert answer.output["status"] == "done"


async def test_a_missing_path_names_it_and_the_keys_present(agent):
    url, _ = agent
    error = await failure({"url": url, "output_path": "result.reply.text"}, item())
    assert (error.kind, error.error_type) == (ErrorKind.PERMANENT, "MalformedResponse")
    assert "result.reply.text" in error.message
    assert "an object with keys answer, keys" in error.message
    assert '"status": "done"' in error.raw_body


async def test_the_keys_shown_for_a_missing_path_are_bounded(agent):
    url, _ = agent
    config = {"url": url, "body": {"mode": "wide"}, "output_path": "answer"}
    error = await failure(config, item())
    assert "key0, key1" in error.message
    assert "key19 and 81 more" in error.message
    assert "key20" not in error.message
    assert len(error.message) < 400
    assert "\x1b" not in error.message


async def test_a_list_index_out_of_range_says_how_long_the_list_is(agent):
    url, _ = agent
    error = await failure({"url": url, "output_path": "choices.5.message"}, item())
    assert "a list of 1 item" in error.message


async def test_a_null_output_is_an_error_not_an_empty_success(agent):
    url, _ = agent
    config = {"url": url, "body": {"mode": "null"}, "output_path": "result.answer"}
    error = await failure(config, item())
    assert "is null" in error.message


async def test_a_text_response(agent):
    url, _ = agent
    config = {"url": url, "body": {"mode": "text"}, "response_type": "text"}
    assert (await generate(config, item())).output == "plain answer ✓"


async def test_a_body_that_is_not_json_is_a_permanent_malformed_response(agent):
    url, _ = agent
    error = await failure({"url": url, "body": {"mode": "badjson"}}, item())
    assert (error.kind, error.error_type) == (ErrorKind.PERMANENT, "MalformedResponse")
    assert error.raw_body == "{not json"


@pytest.mark.parametrize(
    ("mode", "kind"),
    [
        ("status:503", ErrorKind.TRANSIENT),
        ("status:429:7", ErrorKind.TRANSIENT),
        ("status:404", ErrorKind.PERMANENT),
        ("status:422", ErrorKind.PERMANENT),
    ],
)
async def test_statuses_are_classified_as_for_model_endpoints(agent, mode, kind):
    url, _ = agent
    error = await failure({"url": url, "body": {"mode": mode}}, item())
    assert error.kind == kind
    assert error.http_status == int(mode.split(":")[1])
    if mode == "status:429:7":
        assert error.retry_after == 7.0


async def test_the_network_policy_refuses_at_connect_time(agent, settings):
    url, handler = agent
    config = clean_target_config("http", {"url": url})
    settings.EVALSITE_TARGET_DENY = ["127.0.0.0/8"]
    # Built as for a run whose configuration passed before the rule was added.
    target = HttpTarget(HttpTarget.Params.model_construct(**config))
    try:
        with pytest.raises(TargetError) as caught:
            await target.generate(item())
    finally:
        await target.aclose()
    assert (caught.value.error_type, caught.value.kind) == (
        "NetworkPolicy",
        ErrorKind.PERMANENT,
    )
    assert handler.requests == []


# -- secrets -----------------------------------------------------------------


def http_run(project: Project, config: dict, items: list[dict], **kwargs) -> Run:
    return run_create(
        user=kwargs.pop("user", None),
        dataset=make_dataset(project, items),
        target_kind="http",
        target_config=config,
        scorers=kwargs.pop("scorers", ["exact_match"]),
        options={**FAST, **kwargs},
        launch=False,
    )


@pytest.mark.django_db(transaction=True)
async def test_a_project_secret_is_sent_in_the_auth_header_and_never_stored(
    alice: User, project: Project, agent
):
    url, handler = agent
    await sync_to_async(set_bound_secret)(project, alice, "AGENT_TOKEN", TOKEN, url=url)
    config = {
        "url": url,
        "body": {"q": "{input}", "mode": "{metadata.mode}"},
        "auth_secret": "AGENT_TOKEN",
        "auth_header": "X-Agent-Key",
        "auth_prefix": "",
        "output_path": "status",
    }
    items = [
        {"id": "ok", "input": "hi", "expected": "done", "metadata": {"mode": "echo"}},
        {"id": "bad", "input": "hi", "metadata": {"mode": "echo_auth"}},
    ]
    run = await sync_to_async(http_run)(project, config, items, user=alice)
    await execute_run(run.pk)
    assert [r["headers"].get("x-agent-key") for r in handler.requests] == [TOKEN] * 2
    ok = await Result.objects.aget(run=run, item_index=0)
    bad = await Result.objects.aget(run=run, item_index=1)
    assert ok.output == "done"
    assert bad.error_type == "HTTP401"
    assert "[redacted secret auth] is not valid" in bad.error_message
    await run.arefresh_from_db()
    stored = str([run.target_config, bad.error_message, bad.attempts, ok.attempts])
    assert TOKEN not in stored


@pytest.mark.django_db(transaction=True)
async def test_an_answer_that_echoes_the_secret_stores_it_redacted(
    alice: User, project: Project, agent
):
    url, handler = agent
    await sync_to_async(store_secret)(project, alice, "AGENT_TOKEN", TOKEN, url=url)
    config = {
        "url": url,
        "body": {"mode": "echo_headers"},
        "auth_secret": "AGENT_TOKEN",
        "output_path": "headers",
    }
    items = [{"id": "1", "input": "hi", "expected": "x"}]
    run = await sync_to_async(http_run)(project, config, items, user=alice)
    await execute_run(run.pk)
    assert handler.requests[0]["headers"]["authorization"] == f"Bearer {TOKEN}"
    result = await Result.objects.aget(run=run)
    assert result.output["authorization"] == "Bearer [redacted secret auth]"
    assert TOKEN not in str(result.attempts)


@pytest.mark.django_db
def test_an_environment_variable_only_if_allowed_and_for_its_host(
    agent, settings, monkeypatch
):
    url, _ = agent
    monkeypatch.setenv("AGENT_KEY", TOKEN)
    with pytest.raises(ConfigError, match="not a variable the operator allows") as e:
        clean_target_config("http", {"url": url, "auth_env": "AGENT_KEY"})
    assert e.value.field == "config.auth_env"
    settings.EVALSITE_ENV_SECRETS = {"AGENT_KEY": ("agent.example.org",)}
    with pytest.raises(ConfigError, match=r"may only be sent to agent\.example\.org"):
        clean_target_config("http", {"url": url, "auth_env": "AGENT_KEY"})
    # Bound to the host alone: https on port 443, not this http://...:port.
    settings.EVALSITE_ENV_SECRETS = {"AGENT_KEY": ("127.0.0.1",)}
    with pytest.raises(ConfigError, match=r"not to http://127\.0\.0\.1:"):
        clean_target_config("http", {"url": url, "auth_env": "AGENT_KEY"})
    settings.EVALSITE_ENV_SECRETS = {"AGENT_KEY": (str(Destination.of(url)),)}
    assert clean_target_config("http", {"url": url, "auth_env": "AGENT_KEY"})


@pytest.mark.django_db(transaction=True)
async def test_an_allowed_environment_variable_is_sent(
    project: Project, agent, settings, monkeypatch
):
    url, handler = agent
    settings.EVALSITE_ENV_SECRETS = {"AGENT_KEY": (str(Destination.of(url)),)}
    monkeypatch.setenv("AGENT_KEY", TOKEN)
    config = {"url": url, "auth_env": "AGENT_KEY", "output_path": "status"}
    run = await sync_to_async(http_run)(
        project, config, [{"input": "x", "expected": "done"}]
    )
    assert await execute_run(run.pk) == RunStatus.COMPLETED
    assert handler.requests[0]["headers"]["authorization"] == f"Bearer {TOKEN}"


# -- through the executor ---------------------------------------------------

SUSPENDING = {
    "status_field": "status",
    "suspended_values": ["waiting_for_input", "suspended"],
}


def modes(*names: str) -> list[dict]:
    return [
        {"id": f"i{n}", "input": f"q{n}", "expected": "done", "metadata": {"mode": m}}
        for n, m in enumerate(names)
    ]


def agent_config(url: str, **extra: Any) -> dict:
    body = {"q": "{input}", "mode": "{metadata.mode}"}
    return {"url": url, "body": body, "output_path": "status", **extra}


@pytest.mark.django_db(transaction=True)
async def test_a_run_against_the_agent_stores_outputs_and_scores(project, agent):
    url, _ = agent
    run = await sync_to_async(http_run)(
        project, agent_config(url), modes("echo", "echo", "echo")
    )
    assert await execute_run(run.pk) == RunStatus.COMPLETED
    await run.arefresh_from_db()
    assert (run.processed, run.succeeded) == (3, 3)
    outputs = [r.output async for r in Result.objects.filter(run=run)]
    assert outputs == ["done"] * 3


@pytest.mark.django_db(transaction=True)
async def test_a_transient_failure_is_retried_after_retry_after(project, agent):
    url, handler = agent
    run = await sync_to_async(http_run)(
        project, agent_config(url, output_path="result.answer"), modes("flaky:a")
    )
    await execute_run(run.pk)
    result = await Result.objects.aget(run=run)
    assert result.status == Result.Status.SUCCEEDED
    assert result.output == "recovered"
    assert [a.get("http_status") for a in result.attempts] == [503, 200]
    assert len(handler.requests) == 2


@pytest.mark.django_db(transaction=True)
async def test_a_slow_agent_times_out_and_is_retried(project, agent):
    url, _ = agent
    run = await sync_to_async(http_run)(
        project,
        agent_config(url),
        modes("sleep:3"),
        max_attempts=2,
        timeout_seconds=0.3,
    )
    await execute_run(run.pk)
    result = await Result.objects.aget(run=run)
    assert (result.status, result.error_kind) == ("timed_out", ErrorKind.TIMEOUT)
    assert len(result.attempts) == 2


@pytest.mark.django_db(transaction=True)
async def test_a_permanent_failure_is_not_retried(project, agent):
    url, _ = agent
    run = await sync_to_async(http_run)(
        project, agent_config(url), modes("status:400"), max_attempts=3
    )
    await execute_run(run.pk)
    result = await Result.objects.aget(run=run)
    assert (result.error_kind, len(result.attempts)) == (ErrorKind.PERMANENT, 1)


@pytest.mark.django_db(transaction=True)
async def test_a_suspended_agent_is_its_own_kind_kept_and_not_retried(project, agent):
    url, handler = agent
    run = await sync_to_async(http_run)(
        project,
        agent_config(url, **SUSPENDING),
        modes("echo", "suspended"),
        max_attempts=3,
    )
    assert await execute_run(run.pk) == RunStatus.COMPLETED_WITH_ERRORS
    result = await Result.objects.aget(run=run, item_index=1)
    assert result.status == Result.Status.FAILED
    assert (result.error_kind, result.error_type) == (ErrorKind.SUSPENDED, "Suspended")
    assert result.error_message == (
        "the agent is suspended: status is 'waiting_for_input'"
    )
    assert len(result.attempts) == 1
    assert "Which city did you mean?" in result.attempts[0]["raw_body"]
    assert len(handler.requests) == 2
    assert await Result.objects.filter(run=run, status="succeeded").acount() == 1


@pytest.fixture
def suspended_run(project: Project, agent) -> Run:
    from asgiref.sync import async_to_sync

    url, _ = agent
    run = http_run(project, agent_config(url, **SUSPENDING), modes("echo", "suspended"))
    async_to_sync(execute_run)(run.pk)
    return run


@pytest.mark.django_db(transaction=True)
def test_suspended_results_are_filtered_counted_and_shown(
    suspended_run: Run, bob_client: Client
):
    run = suspended_run
    filters = ResultFilters.parse({"error_kind": "suspended"}, run=run)
    found = result_filter(run=run, filters=filters)
    assert list(found.values_list("item_index", flat=True)) == [1]
    assert run_summary(run=run).error_kinds == {"suspended": 1}
    (cluster,) = run_clusters(run=run).errors
    assert (cluster.kind, cluster.error_type, cluster.count) == (
        "suspended",
        "Suspended",
        1,
    )
    page = bob_client.get(
        reverse("runs:run_detail", args=[run.pk]), {"error_kind": "suspended"}
    )
    assert page.status_code == 200
    html = page.content.decode()
    assert '<option value="suspended" selected>Suspended</option>' in html
    result = Result.objects.get(run=run, item_index=1)
    detail = bob_client.get(
        reverse("runs:result_detail", args=[run.pk, result.pk])
    ).content.decode()
    assert "Suspended" in detail
    assert "Which city did you mean?" in detail


@pytest.mark.django_db
def test_an_http_target_is_created_from_the_targets_form(
    alice: User, bob_client: Client, project: Project
):
    set_bound_secret(
        project, alice, "AGENT_TOKEN", TOKEN, url="https://agent.example.org"
    )
    data = {
        "project": project.pk,
        "name": "agent",
        "kind": "http",
        "http__url": "https://agent.example.org/run",
        "http__method": "PUT",
        "http__body": '{"q": "{input}", "n": "{metadata.n}"}',
        "http__headers": '{"X-Team": "eval"}',
        "http__auth_secret": "AGENT_TOKEN",
        "http__output_path": "result.answer",
        "http__status_field": "status",
        "http__suspended_values": '["waiting_for_input"]',
    }
    response = bob_client.post(reverse("runs:target_list"), data)
    assert response.status_code == 302
    config = Target.objects.get(name="agent").config
    assert config["method"] == "PUT"
    assert config["body"] == {"q": "{input}", "n": "{metadata.n}"}
    assert config["headers"] == {"X-Team": "eval"}
    assert config["suspended_values"] == ["waiting_for_input"]


@pytest.mark.django_db
def test_the_targets_form_shows_an_unknown_body_field_on_its_field(
    bob_client: Client, project: Project
):
    data = {
        "project": project.pk,
        "name": "agent",
        "kind": "http",
        "http__url": "https://agent.example.org/run",
        "http__body": '{"q": "{question}"}',
    }
    response = bob_client.post(reverse("runs:target_list"), data)
    assert response.status_code == 200
    errors = response.context["form"].errors
    assert "{question} is not an item field" in errors["http__body"][0]


@pytest.mark.django_db(transaction=True)
async def test_the_request_shown_is_the_request_sent_without_its_secret(
    alice: User, project: Project, agent
):
    url, handler = agent
    await sync_to_async(set_bound_secret)(project, alice, "AGENT_TOKEN", TOKEN, url=url)
    config = {
        "url": url,
        "body": {"q": "{input}", "n": "{metadata.n}", "mode": "echo"},
        "headers": {"X-Suite": "nightly"},
        "auth_secret": "AGENT_TOKEN",
        "output_path": "status",
    }
    items = [{"id": "a", "input": "2+2?", "expected": "done", "metadata": {"n": 3}}]
    run = await sync_to_async(http_run)(project, config, items, user=alice)
    await execute_run(run.pk)
    result = await Result.objects.select_related("item").aget(run=run)

    shown = await sync_to_async(result_request)(run=run, item=result.item)

    sent = handler.requests[0]
    assert shown is not None
    assert shown["body"] == sent["body"] == {"q": "2+2?", "n": 3, "mode": "echo"}
    assert (shown["method"], shown["url"]) == ("POST", url)
    assert shown["headers"] == {
        "X-Suite": "nightly",
        "Authorization": "Bearer <secret AGENT_TOKEN>",
    }
    assert TOKEN not in str(shown)
    page = await sync_to_async(_result_page)(alice, result)
    assert "&lt;secret AGENT_TOKEN&gt;" in page
    assert TOKEN not in page


def _result_page(user: User, result: Result) -> str:
    client = Client()
    client.force_login(user)
    response = client.get(
        reverse("runs:result_detail", args=[result.run_id, result.pk])
    )
    assert response.status_code == 200
    return response.content.decode()
