"""Alerts reach a real local receiver, signed, retried, logged, off the run's path."""

from __future__ import annotations

import hashlib
import hmac
import json

import pytest
from django.core import mail
from scipy.stats import binomtest

from runs.alerts import services
from runs.alerts.findings import WORSE_THAN_BASELINE
from runs.models import AlertChannel, AlertDelivery, Run
from runs.results.services import run_launch
from tests.alerts.receivers import (
    closed_port_url,
    deliveries_settled,
    receiver,
    wait_for,
)
from tests.comparisons import paired_runs
from tests.factories import echo_run

live_db = pytest.mark.django_db(transaction=True)
Status = AlertDelivery.Status


def webhook(project, user, url: str) -> tuple[AlertChannel, str]:
    saved = services.channel_create(
        project=project, user=user, name="ci hook", kind="webhook", url=url
    )
    assert saved.secret is not None
    return saved.channel, saved.secret


def final(delivery: AlertDelivery) -> AlertDelivery:
    wait_for(
        lambda: AlertDelivery.objects.get(pk=delivery.pk).is_final,
        f"delivery {delivery.pk} ended",
    )
    return AlertDelivery.objects.get(pk=delivery.pk)


@live_db
def test_a_worse_run_sends_a_correctly_signed_alert(project, alice, dataset):
    baseline, candidate = paired_runs(
        dataset, both_passed=0, regressions=10, improvements=0, both_failed=0
    )
    with receiver() as hook:
        channel, secret = webhook(project, alice, hook.url)
        (delivery,) = services.announce(candidate, baseline, [channel])
        assert final(delivery).status == Status.DELIVERED
    (request,) = hook.requests
    timestamp = request.headers["X-Evalsite-Timestamp"]
    expected = hmac.new(
        secret.encode(), timestamp.encode() + b"." + request.body, hashlib.sha256
    ).hexdigest()
    assert request.headers["X-Evalsite-Signature"] == f"sha256={expected}"
    assert request.headers["X-Evalsite-Delivery"] == str(delivery.pk)
    body = json.loads(request.body)
    assert body["project"] == {"id": project.pk, "name": project.name}
    assert body["run"]["id"] == candidate.pk
    assert body["run"]["url"] == f"https://evals.example.org/runs/{candidate.pk}/"
    assert body["baseline"]["id"] == baseline.pk
    (finding,) = body["findings"]
    assert finding["kind"] == WORSE_THAN_BASELINE
    assert finding["verdict"] == "worse"
    assert (finding["baseline_pass_rate"], finding["pass_rate"]) == (1.0, 0.0)
    assert finding["delta"] == -1.0
    # Ten regressions, no improvement: McNemar's exact test is a binomial test.
    reference = binomtest(0, 10, 0.5).pvalue
    assert finding["p_value"] == pytest.approx(reference)


@live_db
def test_a_tie_is_not_an_alert(project, alice, dataset):
    baseline, candidate = paired_runs(
        dataset, both_passed=5, regressions=2, improvements=2, both_failed=1
    )
    with receiver() as hook:
        channel, _ = webhook(project, alice, hook.url)
        assert services.announce(candidate, baseline, [channel]) == []
        deliveries_settled()
    assert hook.requests == []
    assert not AlertDelivery.objects.exists()


@live_db
def test_a_receiver_that_is_down_is_retried_and_logged(project, alice, dataset):
    baseline, candidate = paired_runs(
        dataset, both_passed=0, regressions=10, improvements=0, both_failed=0
    )
    channel, _ = webhook(project, alice, closed_port_url())
    (delivery,) = services.announce(candidate, baseline, [channel])
    delivery = final(delivery)
    assert delivery.status == Status.FAILED
    assert [a["number"] for a in delivery.attempts] == [1, 2, 3]
    assert all(a["outcome"] == "error" for a in delivery.attempts)
    assert all("ClientConnectorError" in a["error"] for a in delivery.attempts)


@live_db
def test_a_held_receiver_never_delays_a_run(project, alice, dataset):
    baseline, candidate = paired_runs(
        dataset, both_passed=0, regressions=10, improvements=0, both_failed=0
    )
    with receiver(statuses=[503, 503], held=True) as hook:
        channel, _ = webhook(project, alice, hook.url)
        services.announce_later(
            run_id=candidate.pk, baseline_id=baseline.pk, channel_ids=[channel.pk]
        )
        assert hook.arrived.wait(30)
        (delivery,) = AlertDelivery.objects.all()
        assert delivery.status == Status.SENDING
        # The receiver holds the alert; another run starts and ends meanwhile.
        run = echo_run(dataset)
        run_launch(run=run)
        wait_for(lambda: Run.objects.get(pk=run.pk).is_final, "the run ended")
        assert Run.objects.get(pk=run.pk).status == Run.Status.COMPLETED
        assert AlertDelivery.objects.get(pk=delivery.pk).status == Status.SENDING
        hook.gate.set()
        delivery = final(delivery)
    assert delivery.status == Status.DELIVERED
    assert [a["status_code"] for a in delivery.attempts] == [503, 503, 200]
    assert "HTTP 503" in delivery.attempts[0]["error"]


@live_db
def test_a_client_error_is_not_retried(project, alice, dataset):
    baseline, candidate = paired_runs(
        dataset, both_passed=0, regressions=10, improvements=0, both_failed=0
    )
    with receiver(statuses=[410]) as hook:
        channel, _ = webhook(project, alice, hook.url)
        (delivery,) = services.announce(candidate, baseline, [channel])
        delivery = final(delivery)
    assert delivery.status == Status.FAILED
    assert [a["status_code"] for a in delivery.attempts] == [410]


@live_db
def test_slack_gets_text_and_blocks(project, alice, dataset):
    baseline, candidate = paired_runs(
        dataset, both_passed=0, regressions=10, improvements=0, both_failed=0
    )
    with receiver() as hook:
        channel = services.channel_create(
            project=project, user=alice, name="team", kind="slack", url=hook.url
        ).channel
        (delivery,) = services.announce(candidate, baseline, [channel])
        assert final(delivery).status == Status.DELIVERED
    (request,) = hook.requests
    assert "X-Evalsite-Signature" not in request.headers
    body = json.loads(request.body)
    assert set(body) == {"text", "blocks"}
    assert "exact_match" in body["text"] and "against 100.0%" in body["text"]
    assert [block["type"] for block in body["blocks"]] == ["header", "section"]
    assert body["blocks"][1]["text"]["type"] == "mrkdwn"
    assert f"/runs/{candidate.pk}/" in body["blocks"][1]["text"]["text"]


@live_db
def test_email_goes_through_the_email_backend(project, alice, dataset):
    # The test environment's mailer is Django's locmem backend.
    baseline, candidate = paired_runs(
        dataset, both_passed=0, regressions=10, improvements=0, both_failed=0
    )
    channel = services.channel_create(
        project=project,
        user=alice,
        name="leads",
        kind="email",
        emails=["lead@example.org", "qa@example.org"],
    ).channel
    (delivery,) = services.announce(candidate, baseline, [channel])
    assert final(delivery).status == Status.DELIVERED
    (message,) = mail.outbox
    assert message.to == ["lead@example.org", "qa@example.org"]
    assert project.name in message.subject and "1 finding" in message.subject
    assert f"https://evals.example.org/runs/{candidate.pk}/" in message.body


@live_db
def test_a_channel_of_another_project_is_never_sent_to(
    project, other_project, alice, mallory, dataset
):
    baseline, candidate = paired_runs(
        dataset, both_passed=0, regressions=10, improvements=0, both_failed=0
    )
    with receiver() as hook:
        foreign, _ = webhook(other_project, mallory, hook.url)
        assert services.announce(candidate, baseline, [foreign]) == []
        services.announce_later(
            run_id=candidate.pk, baseline_id=baseline.pk, channel_ids=[foreign.pk]
        )
        deliveries_settled()
    assert hook.requests == []
    assert not AlertDelivery.objects.exists()


@live_db
def test_a_test_delivery_is_sent(project, bob, dataset):
    with receiver() as hook:
        channel, _ = webhook(project, bob, hook.url)
        delivery = final(services.channel_test(channel=channel, user=bob))
    assert delivery.status == Status.DELIVERED and delivery.test
    body = json.loads(hook.requests[0].body)
    assert body["event"] == "test" and body["channel"] == "ci hook"
