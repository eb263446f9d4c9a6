"""One target's page: read, edit, delete (runs keep their copy) and "send one
request" through the real target code path."""

from __future__ import annotations

import dataclasses
import json
import re
import socket
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth.models import User
from django.test import AsyncClient, Client
from django.urls import reverse
from django.utils.html import escape

from runs.models import Dataset, ModelPrice, Project, Target
from runs.results.services import run_create
from runs.targets.services import target_create, target_try
from runs.testing.fake_openai import FakeOpenAIServer
from tests.factories import set_bound_secret
from tests.local_http import serve

pytestmark = pytest.mark.django_db


@pytest.fixture
def target(project: Project, alice: User) -> Target:
    return target_create(
        project=project,
        user=alice,
        name="local",
        kind="openai_chat",
        config={"base_url": "http://127.0.0.1:9/v1", "model": "m-1"},
    )


def _url(name: str, target: Target) -> str:
    return reverse(f"runs:{name}", args=[target.pk])


def _edit(target: Target, **changes: object) -> dict[str, object]:
    """The edit form's fields: the name and the kind's declared parameters."""
    config = changes.pop("config", target.config)
    if isinstance(config, str):
        config = json.loads(config)
    data: dict[str, object] = {"name": target.name}
    data |= {f"{target.kind}__{key}": value for key, value in config.items()}
    data.update(changes)
    return data


def _dead_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _point_at(target: Target, base_url: str) -> Target:
    Target.objects.filter(pk=target.pk).update(
        config={**target.config, "base_url": base_url}
    )
    target.refresh_from_db()
    return target


# -- the page --------------------------------------------------------------------


def test_target_page_shows_the_configuration(
    victor_client: Client, target: Target
) -> None:
    response = victor_client.get(_url("target_detail", target))

    assert response.status_code == 200
    page = response.content.decode()
    assert "local" in page and "m-1" in page
    assert 'id="target-form"' not in page and 'id="try-form"' not in page


def test_target_page_offers_edit_try_and_delete_to_editors(
    bob_client: Client, target: Target
) -> None:
    page = bob_client.get(_url("target_detail", target)).content.decode()

    assert 'id="target-form"' in page
    assert 'id="try-form"' in page and "Say hello" in page
    assert 'id="delete-form"' in page


def test_targets_list_links_to_the_target_page(
    victor_client: Client, target: Target
) -> None:
    page = victor_client.get(reverse("runs:target_list")).content.decode()

    assert f'href="{_url("target_detail", target)}"' in page


@pytest.mark.parametrize(
    ("name", "method"),
    [
        ("target_detail", "get"),
        ("target_detail", "post"),
        ("target_delete", "post"),
        ("target_try", "post"),
    ],
)
def test_outsider_gets_404_everywhere(
    mallory_client: Client, target: Target, name: str, method: str
) -> None:
    response = getattr(mallory_client, method)(_url(name, target), _edit(target))

    assert response.status_code == 404
    assert Target.objects.filter(pk=target.pk, name="local").exists()


# -- edit --------------------------------------------------------------------------


def test_editor_renames_and_reconfigures_a_target(
    bob_client: Client, target: Target
) -> None:
    config = {**target.config, "model": "m-2", "temperature": "0.5"}

    response = bob_client.post(
        _url("target_detail", target),
        _edit(target, name="renamed", config=json.dumps(config)),
    )

    target.refresh_from_db()
    assert response.status_code == 302
    assert target.name == "renamed"
    assert target.config["model"] == "m-2"
    assert target.config["temperature"] == 0.5  # cleaned as on creation


def test_edit_keeps_the_kind_and_project(
    bob_client: Client, target: Target, other_project: Project
) -> None:
    bob_client.post(
        _url("target_detail", target),
        _edit(target, kind="python", project=other_project.pk),
    )

    target.refresh_from_db()
    assert (target.kind, target.project.name) == ("openai_chat", "Research")


def test_edit_validates_the_config_like_creation(
    bob_client: Client, target: Target
) -> None:
    bad = {"base_url": "ftp://x", "model": "m"}

    response = bob_client.post(
        _url("target_detail", target), _edit(target, config=json.dumps(bad))
    )

    target.refresh_from_db()
    assert response.status_code == 200
    assert (
        "config.base_url" in response.context["form"].errors["openai_chat__base_url"][0]
    )
    assert target.config["base_url"] == "http://127.0.0.1:9/v1"


def test_edit_stores_no_secret_value(bob_client: Client, target: Target) -> None:
    config = {**target.config, "api_key": "sk-123"}

    bob_client.post(
        _url("target_detail", target), _edit(target, config=json.dumps(config))
    )

    assert "sk-123" not in json.dumps(Target.objects.get(pk=target.pk).config)


def test_edit_to_a_taken_name_is_refused(
    bob_client: Client, target: Target, project: Project, alice: User
) -> None:
    target_create(project=project, user=alice, name="other", kind="demo", config={})

    response = bob_client.post(
        _url("target_detail", target), _edit(target, name="other")
    )

    assert "exists" in response.context["form"].errors["name"][0]
    assert Target.objects.get(pk=target.pk).name == "local"


def test_viewer_cannot_edit(victor_client: Client, target: Target) -> None:
    response = victor_client.post(
        _url("target_detail", target), _edit(target, name="mine")
    )

    assert response.status_code == 403
    assert Target.objects.get(pk=target.pk).name == "local"


def test_viewer_with_an_invalid_form_is_still_forbidden(
    victor_client: Client, target: Target
) -> None:
    response = victor_client.post(_url("target_detail", target), {"config": "{"})

    assert response.status_code == 403


# -- delete ------------------------------------------------------------------------


def test_deleting_a_target_keeps_its_runs_readable(
    bob_client: Client, target: Target, dataset: Dataset, bob: User
) -> None:
    run = run_create(
        user=bob, dataset=dataset, target=target, scorers=["exact_match"], launch=False
    )

    response = bob_client.post(_url("target_delete", target))

    assert response.status_code == 302
    assert not Target.objects.filter(pk=target.pk).exists()
    run.refresh_from_db()
    assert run.target_id is None
    assert (run.target_name, run.target_kind) == ("local", "openai_chat")
    page = bob_client.get(reverse("runs:run_detail", args=[run.pk]))
    assert page.status_code == 200
    text = page.content.decode()
    assert "local" in text and "openai_chat" in text and "m-1" in text


def test_delete_over_htmx_redirects_the_browser(
    bob_client: Client, target: Target
) -> None:
    response = bob_client.post(_url("target_delete", target), HTTP_HX_REQUEST="true")

    assert response.status_code == 204
    assert response["HX-Redirect"] == reverse("runs:target_list")
    assert not Target.objects.filter(pk=target.pk).exists()


def test_viewer_cannot_delete(victor_client: Client, target: Target) -> None:
    response = victor_client.post(_url("target_delete", target))

    assert response.status_code == 403
    assert Target.objects.filter(pk=target.pk).exists()


# -- send one request --------------------------------------------------------------


def test_try_shows_the_answer_of_the_real_endpoint(
    bob_client: Client, target: Target, fake_openai: FakeOpenAIServer
) -> None:
    _point_at(target, fake_openai.base_url)

    response = bob_client.post(
        _url("target_try", target),
        {"input": "What is 20 + 22?"},
        HTTP_HX_REQUEST="true",
    )

    outcome = response.context["outcome"]
    assert response.status_code == 200
    assert outcome.ok and outcome.output == "42"
    assert '<span class="badge ok">answered</span>' in response.content.decode()
    assert fake_openai.stats.requests == 1


def test_try_without_htmx_renders_the_whole_page(
    bob_client: Client, target: Target, fake_openai: FakeOpenAIServer
) -> None:
    _point_at(target, fake_openai.base_url)

    response = bob_client.post(_url("target_try", target), {"input": "Say hello"})

    assert response.status_code == 200
    assert response.context["outcome"].output == "Say hello"
    assert 'id="target-form"' in response.content.decode()


def test_try_against_a_dead_port_shows_the_error(
    bob_client: Client, target: Target
) -> None:
    _point_at(target, f"http://127.0.0.1:{_dead_port()}/v1")

    response = bob_client.post(
        _url("target_try", target), {"input": "Say hello"}, HTTP_HX_REQUEST="true"
    )

    outcome = response.context["outcome"]
    assert response.status_code == 200
    assert not outcome.ok
    assert "Connect" in outcome.error_type or "Connect" in outcome.error
    assert escape(outcome.error) in response.content.decode()


def test_try_shows_an_http_error(
    bob_client: Client, target: Target, fake_openai: FakeOpenAIServer
) -> None:
    _point_at(target, fake_openai.base_url)

    response = bob_client.post(
        _url("target_try", target),
        {"input": "[[status:503]] hi"},
        HTTP_HX_REQUEST="true",
    )

    outcome = response.context["outcome"]
    assert not outcome.ok and outcome.http_status == 503


def test_try_needs_an_input(bob_client: Client, target: Target) -> None:
    response = bob_client.post(_url("target_try", target), {"input": ""})

    assert response.status_code == 200
    assert response.context["try_form"].errors["input"]
    assert response.context["outcome"] is None


def test_viewer_cannot_try(
    victor_client: Client, target: Target, fake_openai: FakeOpenAIServer
) -> None:
    _point_at(target, fake_openai.base_url)

    response = victor_client.post(_url("target_try", target), {"input": "hi"})

    assert response.status_code == 403
    assert fake_openai.stats.requests == 0


class _HeaderEcho(BaseHTTPRequestHandler):
    """A chat endpoint that answers with the Authorization header it got."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        content = f"you sent {self.headers.get('Authorization')}"
        body = json.dumps({"choices": [{"message": {"content": content}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass  # keep the test output clean


@pytest.fixture
def header_echo() -> Iterator[str]:
    with serve(_HeaderEcho) as base_url:
        yield base_url


def test_try_never_shows_the_secret_the_target_sends(
    bob_client: Client, alice: User, target: Target, header_echo: str
) -> None:
    secret = "sk-live-0123456789abcdef"
    set_bound_secret(target.project, alice, "TRY_KEY", secret, url=header_echo)
    Target.objects.filter(pk=target.pk).update(
        config={**target.config, "base_url": header_echo, "api_key_secret": "TRY_KEY"}
    )
    target.refresh_from_db()

    response = bob_client.post(
        _url("target_try", target), {"input": "hi"}, HTTP_HX_REQUEST="true"
    )

    assert (
        response.context["outcome"].output
        == "you sent Bearer [redacted secret api_key]"
    )
    assert secret not in response.content.decode()


def test_try_gives_up_after_its_timeout(
    target: Target, bob: User, fake_openai: FakeOpenAIServer
) -> None:
    _point_at(target, fake_openai.base_url)

    outcome = async_to_sync(target_try)(
        target_id=target.pk, user=bob, text="[[hang]]", seconds=0.2
    )

    assert not outcome.ok
    assert outcome.error_type == "Timeout"
    assert outcome.error == "no answer within 0.2 seconds"


def test_try_a_python_target(bob_client: Client, project: Project, bob: User) -> None:
    target = target_create(
        project=project,
        user=bob,
        name="reverser",
        kind="python",
        config={"callable": "runs.targets.examples.reverse"},
    )

    response = bob_client.post(_url("target_try", target), {"input": "hello"})

    assert response.context["outcome"].output == "olleh"


@pytest.mark.django_db(transaction=True)
async def test_try_through_the_asgi_handler(
    project: Project, bob: User, fake_openai: FakeOpenAIServer
) -> None:
    # The view is a coroutine: under ASGI it runs on the server's loop.
    target = await Target.objects.acreate(
        project=project,
        name="local",
        kind="openai_chat",
        config={"base_url": fake_openai.base_url, "model": "m", "api_key_env": ""},
    )
    client = AsyncClient()
    await client.aforce_login(bob)

    response = await client.post(
        _url("target_try", target), {"input": "What is 1 + 1?"}, HTTP_HX_REQUEST="true"
    )

    assert response.status_code == 200
    assert response.context["outcome"].output == "2"


@pytest.mark.parametrize("surface", ["page", "api"])
def test_try_a_judge_as_the_target(
    surface: str,
    bob_client: Client,
    project: Project,
    bob: User,
    fake_openai: FakeOpenAIServer,
) -> None:
    # The judge prices its tokens: the price table is read before the try
    # goes out, never from the event loop.
    ModelPrice.objects.create(
        model="fake-judge", prompt_per_million=1, completion_per_million=2
    )
    target = target_create(
        project=project,
        user=bob,
        name="judge",
        kind="scorer",
        config={
            "scorer_kind": "llm_judge",
            "params": {"base_url": fake_openai.base_url, "model": "fake-judge"},
        },
    )

    if surface == "api":
        response = bob_client.post(
            f"/api/v1/targets/{target.pk}/try",
            {"input": "Paris"},
            content_type="application/json",
        )
        outcome = response.json()
    else:
        response = bob_client.post(_url("target_try", target), {"input": "Paris"})
        outcome = dataclasses.asdict(response.context["outcome"])

    assert response.status_code == 200
    assert (outcome["ok"], outcome["error"]) == (True, ""), outcome["error"]
    assert outcome["output"] in {"pass", "fail"}
    assert fake_openai.stats.requests == 1


def test_edit_marks_the_fields_as_creation_does(
    bob_client: Client, target: Target
) -> None:
    create = bob_client.get(reverse("runs:target_list")).content.decode()
    edit = bob_client.get(_url("target_detail", target)).content.decode()

    model_label = re.compile(r'<label for="id_openai_chat__model">[^\n]*</label>')
    assert model_label.search(edit)[0] == model_label.search(create)[0]
    assert "(required)" in model_label.search(edit)[0]
    assert "(optional)" not in edit


def test_a_refused_connection_is_said_plainly_without_tls_wording(
    bob_client: Client, target: Target
) -> None:
    port = _dead_port()
    _point_at(target, f"http://127.0.0.1:{port}/v1")

    response = bob_client.post(
        _url("target_try", target), {"input": "Say hello"}, HTTP_HX_REQUEST="true"
    )

    page = response.content.decode()
    assert f"cannot connect to 127.0.0.1:{port} (connection refused)" in page
    assert "ssl:" not in page
