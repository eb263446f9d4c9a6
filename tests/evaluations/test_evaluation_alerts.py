"""A run of an evaluation that ends worse than its baseline reaches the
evaluation's channels: a real local receiver gets one signed alert; a tie, or
an evaluation with no channel, sends nothing."""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Iterator

import pytest
from django.contrib.auth.models import User

from runs.alerts import services as alerts
from runs.alerts.findings import WORSE_THAN_BASELINE
from runs.evaluations.services import evaluation_run
from runs.executor.launchers import local_launcher
from runs.models import AlertChannel, AlertDelivery, Dataset, Project, Run, RunStatus
from tests.alerts.receivers import deliveries_settled, receiver, wait_for
from tests.evaluations.conftest import make_evaluation
from tests.factories import make_dataset

pytestmark = pytest.mark.django_db(transaction=True)

REVERSE = {"callable": "runs.targets.examples.reverse"}
ITEMS = 10


@pytest.fixture(autouse=True)
def _alerts(settings) -> Iterator[None]:
    settings.EVALSITE_ALERT_RETRY_SECONDS = 0
    settings.EVALSITE_ALERT_ATTEMPTS = 3
    settings.EVALSITE_BASE_URL = "https://evals.example.org"
    yield
    deliveries_settled()  # before the database is flushed


@pytest.fixture
def mirror(project: Project) -> Dataset:
    """Items whose answer is their input: the echo target passes them all,
    the reverse target none."""
    items = [
        {"id": f"q{i}", "input": f"item {i} answer", "expected": f"item {i} answer"}
        for i in range(ITEMS)
    ]
    return make_dataset(project, items, name="mirror")


def webhook(project: Project, user: User, url: str) -> tuple[AlertChannel, str]:
    saved = alerts.channel_create(
        project=project, user=user, name="ci hook", kind="webhook", url=url
    )
    assert saved.secret is not None
    return saved.channel, saved.secret


def ended(run: Run) -> Run:
    """The run once it has ended, its evaluation told, and whatever that
    handed to the background (the comparison, deliveries) is done."""

    def told() -> bool:
        stored = Run.objects.get(pk=run.pk)
        return bool(stored.evaluation_end) and run.pk not in local_launcher().tasks

    wait_for(told, f"run {run.pk} ended and its evaluation was told")
    deliveries_settled()
    return Run.objects.get(pk=run.pk)


def test_a_significantly_worse_run_sends_one_signed_alert(
    project: Project, mirror: Dataset, bob: User
) -> None:
    with receiver() as hook:
        channel, secret = webhook(project, bob, hook.url)
        evaluation = make_evaluation(project, mirror, bob, channels=[channel.pk])
        baseline = ended(evaluation_run(evaluation=evaluation, user=bob))
        assert (baseline.status, baseline.succeeded) == (RunStatus.COMPLETED, ITEMS)
        assert hook.requests == []  # passing everything, with nothing before it
        worse = ended(
            evaluation_run(evaluation=evaluation, user=bob, target_config=REVERSE)
        )
        assert worse.status == RunStatus.COMPLETED
    (delivery,) = AlertDelivery.objects.all()
    assert (delivery.channel_id, delivery.run_id) == (channel.pk, worse.pk)
    assert delivery.status == AlertDelivery.Status.DELIVERED
    (request,) = hook.requests
    timestamp = request.headers["X-Evalsite-Timestamp"]
    expected = hmac.new(
        secret.encode(), timestamp.encode() + b"." + request.body, hashlib.sha256
    ).hexdigest()
    assert request.headers["X-Evalsite-Signature"] == f"sha256={expected}"
    body = json.loads(request.body)
    assert body["evaluation"] == {
        "id": evaluation.pk,
        "name": "nightly",
        "url": f"https://evals.example.org/evaluations/{evaluation.pk}/",
    }
    assert body["run"]["id"] == worse.pk
    assert body["baseline"]["id"] == baseline.pk
    (finding,) = body["findings"]
    assert finding["kind"] == WORSE_THAN_BASELINE
    assert (finding["scorer"], finding["verdict"]) == ("exact_match", "worse")
    assert (finding["baseline_pass_rate"], finding["pass_rate"]) == (1.0, 0.0)


def test_a_tied_run_sends_nothing(project: Project, mirror: Dataset, bob: User) -> None:
    with receiver() as hook:
        channel, _ = webhook(project, bob, hook.url)
        evaluation = make_evaluation(project, mirror, bob, channels=[channel.pk])
        ended(evaluation_run(evaluation=evaluation, user=bob))
        again = ended(evaluation_run(evaluation=evaluation, user=bob))
        assert again.status == RunStatus.COMPLETED
    assert hook.requests == []
    assert not AlertDelivery.objects.exists()


def test_an_evaluation_without_channels_sends_nothing(
    project: Project, mirror: Dataset, bob: User
) -> None:
    with receiver() as hook:
        webhook(project, bob, hook.url)  # the project's, not the evaluation's
        evaluation = make_evaluation(project, mirror, bob)
        ended(evaluation_run(evaluation=evaluation, user=bob))
        ended(evaluation_run(evaluation=evaluation, user=bob, target_config=REVERSE))
    assert hook.requests == []
    assert not AlertDelivery.objects.exists()


def test_a_disabled_channel_is_not_told(
    project: Project, mirror: Dataset, bob: User
) -> None:
    with receiver() as hook:
        channel, _ = webhook(project, bob, hook.url)
        evaluation = make_evaluation(project, mirror, bob, channels=[channel.pk])
        alerts.channel_update(channel=channel, user=bob, enabled=False)
        ended(evaluation_run(evaluation=evaluation, user=bob))
        ended(evaluation_run(evaluation=evaluation, user=bob, target_config=REVERSE))
    assert hook.requests == []
    assert not AlertDelivery.objects.exists()
