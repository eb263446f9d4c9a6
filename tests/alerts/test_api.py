"""The alert channels' API: CRUD, secrets shown once, tests, project scope."""

from __future__ import annotations

import json

import pytest

from runs.alerts import services
from runs.errors import InvalidInput
from runs.models import AlertChannel, AlertDelivery
from runs.secrets.store import decrypt

API = "/api/v1/alert-channels"
HOOK = "https://hooks.example.org/evalsite/T000/B000/XXXX"


def post(client, url: str, body: dict | None = None):
    return client.post(url, json.dumps(body or {}), content_type="application/json")


def patch(client, url: str, body: dict):
    return client.patch(url, json.dumps(body), content_type="application/json")


@pytest.fixture
def hook(bob_client, project) -> dict:
    answer = post(
        bob_client,
        API,
        {"project": project.pk, "name": "ci", "kind": "webhook", "url": HOOK},
    )
    assert answer.status_code == 201, answer.content
    return answer.json()


def test_a_webhook_secret_is_returned_once_and_stored_encrypted(bob_client, hook):
    assert hook["secret"].startswith("whsec_")
    channel = AlertChannel.objects.get(pk=hook["id"])
    assert decrypt(channel.secret_ciphertext, name="s") == hook["secret"]
    assert hook["secret"] not in channel.secret_ciphertext
    shown = bob_client.get(f"{API}/{hook['id']}").content.decode()
    listed = bob_client.get(API).content.decode()
    for text in (shown, listed):
        assert hook["secret"] not in text and "T000" not in text
    assert json.loads(shown)["url_origin"] == "https://hooks.example.org"


def test_a_new_secret_replaces_the_old(bob_client, hook):
    answer = post(bob_client, f"{API}/{hook['id']}/secret")
    assert answer.status_code == 200
    fresh = answer.json()["secret"]
    assert fresh != hook["secret"]
    channel = AlertChannel.objects.get(pk=hook["id"])
    assert decrypt(channel.secret_ciphertext, name="s") == fresh


def test_a_metadata_address_is_refused(bob_client, project):
    answer = post(
        bob_client,
        API,
        {
            "project": project.pk,
            "name": "x",
            "kind": "slack",
            "url": "http://169.254.169.254/latest/meta-data/",
        },
    )
    assert answer.status_code == 400
    assert answer.json()["field"] == "url"
    assert not AlertChannel.objects.exists()


def test_a_bad_address_is_named(bob_client, project):
    body = {
        "project": project.pk,
        "name": "mail",
        "kind": "email",
        "emails": ["a@example.org", "not an address"],
    }
    answer = post(bob_client, API, body)
    assert answer.status_code == 400
    assert answer.json()["field"] == "emails[1]"


def test_a_channel_is_changed_and_its_url_kept(bob_client, hook):
    answer = patch(
        bob_client, f"{API}/{hook['id']}", {"name": "nightly", "enabled": False}
    )
    assert answer.status_code == 200
    assert (answer.json()["name"], answer.json()["enabled"]) == ("nightly", False)
    channel = AlertChannel.objects.get(pk=hook["id"])
    assert decrypt(channel.url_ciphertext, name="u") == HOOK


def test_a_test_is_queued_and_logged(bob_client, hook):
    answer = post(bob_client, f"{API}/{hook['id']}/test")
    assert answer.status_code == 202
    assert answer.json()["test"] is True
    log = bob_client.get(f"{API}/{hook['id']}/deliveries").json()
    assert [d["id"] for d in log["items"]] == [answer.json()["id"]]


def test_a_viewer_sees_but_may_not_test(victor_client, hook):
    assert victor_client.get(f"{API}/{hook['id']}").status_code == 200
    assert post(victor_client, f"{API}/{hook['id']}/test").status_code == 403
    assert not AlertDelivery.objects.exists()


def test_another_project_never_sees_nor_uses_a_channel(mallory_client, hook, project):
    url = f"{API}/{hook['id']}"
    assert mallory_client.get(url).status_code == 404
    assert mallory_client.get(f"{url}/deliveries").status_code == 404
    assert post(mallory_client, f"{url}/test").status_code == 404
    assert post(mallory_client, f"{url}/secret").status_code == 404
    assert patch(mallory_client, url, {"name": "mine"}).status_code == 404
    assert mallory_client.delete(url).status_code == 404
    assert mallory_client.get(API).json()["items"] == []
    assert mallory_client.get(f"{API}?project={project.pk}").status_code == 404
    body = {"project": project.pk, "name": "x", "kind": "email", "emails": ["m@x.org"]}
    assert post(mallory_client, API, body).status_code == 404
    assert not AlertDelivery.objects.exists()
    assert AlertChannel.objects.get(pk=hook["id"]).name == "ci"


def test_an_evaluation_may_name_only_its_own_project_channels(
    hook, project, other_project, mallory
):
    foreign = services.channel_create(
        project=other_project, user=mallory, name="x", kind="email", emails=["m@x.org"]
    ).channel
    assert [
        c.pk for c in services.clean_channels(project=project, channel_ids=[hook["id"]])
    ] == [hook["id"]]
    with pytest.raises(InvalidInput) as refused:
        services.clean_channels(project=project, channel_ids=[hook["id"], foreign.pk])
    assert refused.value.field == "channels[1]"
