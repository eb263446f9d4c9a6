"""The alert channel pages: list, create (secret shown once), test, refusals."""

from __future__ import annotations

import re

from runs.models import AlertChannel, AlertDelivery
from tests.evaluations.conftest import make_evaluation
from tests.factories import arithmetic_items, make_dataset

HOOK = "https://hooks.example.org/evalsite/secret-path"


def create(client, project, **data):
    return client.post(f"/projects/{project.pk}/alerts/", data)


def test_a_webhook_made_on_the_page_shows_its_secret_once(bob_client, project):
    answer = create(
        bob_client, project, name="ci", kind="webhook", url=HOOK, enabled="on"
    )
    assert answer.status_code == 200
    secret = re.search(r"whsec_[A-Za-z0-9_-]+", answer.content.decode())
    assert secret is not None
    channel = AlertChannel.objects.get(name="ci")
    page = bob_client.get(f"/alerts/{channel.pk}/").content.decode()
    assert secret.group(0) not in page and "secret-path" not in page
    assert "https://hooks.example.org" in page
    listing = bob_client.get(f"/projects/{project.pk}/alerts/").content.decode()
    assert "ci" in listing and "secret-path" not in listing


def test_a_bad_url_is_shown_on_its_field(bob_client, project):
    answer = create(bob_client, project, name="x", kind="slack", url="ftp://x.org/")
    assert answer.status_code == 200
    assert "http:// or https://" in answer.content.decode()
    assert not AlertChannel.objects.exists()


def test_the_test_button_logs_a_delivery(bob_client, project):
    create(bob_client, project, name="mail", kind="email", emails="a@example.org")
    channel = AlertChannel.objects.get(name="mail")
    answer = bob_client.post(f"/alerts/{channel.pk}/test/")
    assert answer.status_code == 302
    (delivery,) = AlertDelivery.objects.filter(channel=channel)
    assert delivery.test
    page = bob_client.get(f"/alerts/{channel.pk}/").content.decode()
    assert 'id="deliveries"' in page and "Pending" in page


def test_an_outsider_is_told_nothing(mallory_client, bob_client, project):
    create(bob_client, project, name="mail", kind="email", emails="a@example.org")
    channel = AlertChannel.objects.get(name="mail")
    assert mallory_client.get(f"/alerts/{channel.pk}/").status_code == 404
    assert mallory_client.post(f"/alerts/{channel.pk}/test/").status_code == 404
    assert mallory_client.post(f"/alerts/{channel.pk}/delete/").status_code == 404
    assert mallory_client.get(f"/projects/{project.pk}/alerts/").status_code == 404
    answer = create(mallory_client, project, name="m", kind="email", emails="m@x.org")
    assert answer.status_code == 404
    assert not AlertDelivery.objects.exists()
    assert AlertChannel.objects.count() == 1


def test_a_viewer_cannot_add_a_channel(victor_client, project):
    page = victor_client.get(f"/projects/{project.pk}/alerts/").content.decode()
    assert "needs the editor role" in page
    answer = create(victor_client, project, name="v", kind="email", emails="v@x.org")
    assert answer.status_code == 403


def test_deleting_a_channel_deletes_its_log(bob_client, project):
    create(bob_client, project, name="mail", kind="email", emails="a@example.org")
    channel = AlertChannel.objects.get(name="mail")
    bob_client.post(f"/alerts/{channel.pk}/test/")
    answer = bob_client.post(f"/alerts/{channel.pk}/delete/")
    assert answer.status_code == 302
    assert not AlertChannel.objects.exists() and not AlertDelivery.objects.exists()


def test_a_channel_page_names_the_evaluations_that_tell_it(bob, bob_client, project):
    create(bob_client, project, name="mail", kind="email", emails="a@example.org")
    channel = AlertChannel.objects.get(name="mail")
    page = bob_client.get(f"/alerts/{channel.pk}/").content.decode()
    assert "choose this channel on an evaluation's Edit page" in page
    dataset = make_dataset(project, arithmetic_items(3))
    make_evaluation(project, dataset, bob, name="release gate", channels=[channel.pk])
    page = bob_client.get(f"/alerts/{channel.pk}/").content.decode()
    told = page.split('id="channel-evaluations"')[1].split("</div>")[0]
    assert "release gate" in told and "Edit page" not in told


def test_a_delivery_under_way_keeps_the_log_following_it(bob_client, project):
    create(bob_client, project, name="mail", kind="email", emails="a@example.org")
    channel = AlertChannel.objects.get(name="mail")
    delivery = AlertDelivery.objects.create(channel=channel, test=True)
    log = 'id="delivery-log" hx-get'
    assert log in bob_client.get(f"/alerts/{channel.pk}/").content.decode()
    AlertDelivery.objects.filter(pk=delivery.pk).update(status="delivered")
    assert log not in bob_client.get(f"/alerts/{channel.pk}/").content.decode()
