"""Alerts in the distributed mode: each attempt a procrastinate job of a worker."""

from __future__ import annotations

import json

import pytest
from django.db import connection

from runs.alerts import services
from runs.alerts.tasks import TASK_NAME
from runs.models import AlertDelivery
from tests.alerts.receivers import receiver
from tests.comparisons import paired_runs
from tests.distributed.workers import Workers, wait_for, worker_env

pytestmark = pytest.mark.django_db(transaction=True)


def jobs() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM procrastinate_jobs WHERE task_name = %s",
            [TASK_NAME],
        )
        return cursor.fetchone()[0]


def test_a_worker_delivers_and_retries_an_alert(
    distributed, workers: Workers, project, alice, dataset
) -> None:
    baseline, candidate = paired_runs(
        dataset, both_passed=0, regressions=10, improvements=0, both_failed=0
    )
    with receiver(statuses=[503]) as hook:
        channel = services.channel_create(
            project=project, user=alice, name="ci", kind="webhook", url=hook.url
        ).channel
        (delivery,) = services.announce(candidate, baseline, [channel])
        # Deferred, not sent: this process (a web server) sends nothing.
        assert jobs() == 1 and hook.requests == []
        workers.start(
            1,
            env=worker_env(
                EVALSITE_ALERT_RETRY_SECONDS="0", EVALSITE_ALERT_ATTEMPTS="3"
            ),
        )

        def ended() -> bool:
            return AlertDelivery.objects.get(pk=delivery.pk).is_final

        wait_for(ended, what="the delivery ended")
    delivery.refresh_from_db()
    assert delivery.status == AlertDelivery.Status.DELIVERED
    assert [a["status_code"] for a in delivery.attempts] == [503, 200]
    assert json.loads(hook.requests[1].body)["run"]["id"] == candidate.pk
