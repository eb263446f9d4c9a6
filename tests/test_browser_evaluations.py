"""A real browser on the evaluation and alert channel pages: an evaluation made
on its page and run with "Run now" shows its run in its trend; a webhook
channel made on its page gets "Send a test", and its log shows the delivery."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from tests.alerts.receivers import receiver
from tests.browser import signed_in_page

pytestmark = pytest.mark.browser


@pytest.fixture
def loopback_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The server started after this may send to this machine (the receiver)."""
    monkeypatch.setenv("EVALSITE_TARGET_ALLOW", "public,loopback")


def test_make_an_evaluation_run_it_and_see_its_trend(
    server: str, tmp_path: Path
) -> None:
    with signed_in_page(server, viewport={"width": 1280, "height": 1000}) as (
        page,
        problems,
    ):
        page.click("nav >> text=Projects")
        page.click("text=Browser")
        page.click("text=Evaluations")
        page.click("text=New evaluation")
        page.fill("#id_name", "nightly sums")
        page.select_option("#id_dataset", label="Browser / sums v1 (40 items)")
        page.select_option("#id_target", label="Browser / Demo model (demo)")
        page.check("input[name=scorers][value=exact_match]")
        shot(page, tmp_path, "evaluation-form")
        page.click("#evaluation-form button[type=submit].primary")
        page.wait_for_url(re.compile(r"/evaluations/\d+/$"))
        assert "nightly sums" in page.inner_text("h1")
        shot(page, tmp_path, "evaluation-new")

        page.click("#run-now button")
        page.wait_for_url(re.compile(r"/runs/\d+/$"))
        run_id = page.url.rstrip("/").rsplit("/", 1)[1]
        page.wait_for_selector("#run-progress[data-status=completed]", timeout=90_000)
        page.click("#run-evaluation")
        page.wait_for_url(re.compile(r"/evaluations/\d+/$"))
        trend = page.inner_text("#trend")
        assert f"#{run_id}" in trend
        assert page.locator("#trend .trend-marker").count() == 1
        assert f"#{run_id}" in page.inner_text("#evaluation-runs")
        # Its history says what was given, not every field left empty.
        history = page.inner_text("#history")
        assert "nightly sums" in history and "description" not in history
        shot(page, tmp_path, "evaluation-trend")
        assert problems == []


def test_make_a_webhook_channel_and_send_a_test(
    loopback_allowed: None, server: str, tmp_path: Path
) -> None:
    with (
        receiver(held=True) as hook,
        signed_in_page(server, viewport={"width": 1280, "height": 1000}) as (
            page,
            problems,
        ),
    ):
        page.click("nav >> text=Projects")
        page.click("text=Browser")
        page.click("text=Alert channels")
        page.fill("#id_name", "ci hook")
        # Only the field the chosen kind needs is shown. The page's script is
        # deferred: a choice made before it runs is shown once it has (on a
        # loaded machine, after this returned), so the test waits for the
        # state rather than looking at once.
        page.select_option("#id_kind", "email")
        page.wait_for_selector("#id_url", state="hidden")
        assert page.is_hidden("#id_url") and page.is_visible("#id_emails")
        page.select_option("#id_kind", "webhook")
        page.wait_for_selector("#id_emails", state="hidden")
        assert page.is_visible("#id_url") and page.is_hidden("#id_emails")
        page.fill("#id_url", hook.url)
        shot(page, tmp_path, "channel-form")
        page.click("#channel-form button[type=submit]")
        secret = page.inner_text("#channel-secret code.secret").strip()
        assert secret.startswith("whsec_")
        shot(page, tmp_path, "channel-new")

        page.click("#send-test")
        page.wait_for_selector("#deliveries")
        # The receiver holds the request: the log says so, then follows the
        # delivery to its end on the same page.
        assert hook.arrived.wait(30)
        page.wait_for_function(STATUS_IS, arg="Sending", timeout=30_000)
        page.evaluate("window.__same_page = 1")
        shot(page, tmp_path, "channel-sending")
        hook.gate.set()
        page.wait_for_function(STATUS_IS, arg="Delivered", timeout=30_000)
        assert page.evaluate("window.__same_page") == 1
        assert "test" in page.inner_text("#deliveries")
        assert "HTTP 200 ok" in page.inner_text("#deliveries .attempt")
        shot(page, tmp_path, "channel-delivered")
        assert problems == []
    (request,) = hook.requests
    assert json.loads(request.body)["event"] == "test"


STATUS_IS = """(status) => document.querySelector("#deliveries .delivery-status")
    ?.textContent.trim().startsWith(status)"""


def shot(page: object, tmp_path: Path, name: str) -> None:
    page.screenshot(path=str(tmp_path / f"{name}.png"), full_page=True)  # type: ignore[attr-defined]
    if folder := os.environ.get("EVALSITE_SCREENSHOTS"):
        page.screenshot(path=f"{folder}/{name}.png", full_page=True)  # type: ignore[attr-defined]
