"""Evaluations in the admin: read, schedules switched, nothing made there."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from runs.alerts.services import channel_create
from runs.evaluations.schedules import schedule_add, schedules_tick
from runs.models import Evaluation
from tests.evaluations.conftest import T0, at

pytestmark = pytest.mark.django_db


@pytest.fixture
def root_client(db: None) -> Client:
    client = Client()
    client.force_login(User.objects.create_superuser("root", "root@example.org", "pw"))
    return client


def test_the_admin_shows_evaluations_and_the_tick_log(
    root_client: Client, evaluation: Evaluation, bob: User
) -> None:
    schedule_add(evaluation=evaluation, user=bob, cron="* * * * *", now=T0)
    schedules_tick(now=at(1))
    pages = ("evaluation/?q=x", f"evaluation/{evaluation.pk}/change/", "scheduletick/")
    for page in pages:
        assert root_client.get(f"/admin/runs/{page}").status_code == 200, page
    assert root_client.get("/admin/runs/evaluation/add/").status_code == 403
    assert root_client.get("/admin/runs/scheduletick/add/").status_code == 403


def test_the_admin_cannot_change_an_evaluations_channels(
    root_client: Client, evaluation: Evaluation, other_project, mallory: User
) -> None:
    foreign = channel_create(
        project=other_project, user=mallory, name="x", kind="email", emails=["a@b.co"]
    ).channel
    url = f"/admin/runs/evaluation/{evaluation.pk}/change/"
    page = root_client.get(url).content.decode()
    assert 'name="channels"' not in page
    root_client.post(url, {"channels": [foreign.pk]})
    assert not evaluation.channels.exists()
