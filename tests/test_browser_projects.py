"""A real browser on the projects, keys and target pages: the "send one
request" button answers in place (htmx), and a new key is shown once."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.browser import signed_in_page

pytestmark = pytest.mark.browser


def test_projects_keys_and_target_try_in_a_browser(server: str, tmp_path: Path) -> None:
    with signed_in_page(server, viewport={"width": 1280, "height": 900}) as (
        page,
        problems,
    ):
        # The target page: one request answers in place, without a reload.
        page.click("nav >> text=Targets")
        page.click("text=Demo model")
        page.evaluate("window.__marker = 1")
        page.fill("#id_input", "What is 2 + 2?")
        page.click("#try-form button[type=submit]")
        page.wait_for_selector("#try-outcome")
        assert page.evaluate("window.__marker") == 1
        assert page.inner_text("#try-outcome")
        shot(page, tmp_path, "target")

        # Projects: create one, and see oneself as its admin.
        page.click("nav >> text=Projects")
        page.fill("#id_name", "Second")
        page.click("#project-form button[type=submit]")
        page.wait_for_selector("#members")
        assert "admin" in page.inner_text("#members")
        assert page.locator("#invite-form").count() == 1
        shot(page, tmp_path, "project")

        # Keys: the new key is shown once, then only its prefix.
        page.click("text=API keys")
        page.fill("#id_name", "laptop")
        page.click("#key-form button[type=submit]")
        key = page.inner_text("#new-key code").strip()
        assert key.startswith("evk_")
        shot(page, tmp_path, "keys")
        page.goto(f"{server}/account/keys/")
        assert key not in page.content()
        assert "laptop" in page.inner_text("#keys")
        assert problems == []


@pytest.fixture
def one_try_a_minute(monkeypatch: pytest.MonkeyPatch) -> None:
    """The server started after this allows each user one try a minute."""
    monkeypatch.setenv("EVALSITE_TRY_PER_MINUTE", "1")


def test_a_refused_try_says_why_in_place(
    one_try_a_minute: None, server: str, tmp_path: Path
) -> None:
    with signed_in_page(server) as (page, problems):
        page.click("nav >> text=Targets")
        page.click("text=Demo model")
        page.fill("#id_input", "What is 2 + 2?")
        page.click("#try-form button[type=submit]")
        page.wait_for_selector("#try-outcome")

        page.click("#try-form button[type=submit]")
        page.wait_for_selector("#try-area .error")

        assert "at most 1 try a minute" in page.inner_text("#try-area .error")
        shot(page, tmp_path, "target-try-refused")
        # The refusal is a 429: the browser logs it, and nothing else.
        assert all("429" in problem for problem in problems), problems


def shot(page: object, tmp_path: Path, name: str) -> None:
    page.screenshot(path=str(tmp_path / f"{name}.png"), full_page=True)  # type: ignore[attr-defined]
    if folder := os.environ.get("EVALSITE_SCREENSHOTS"):
        page.screenshot(path=f"{folder}/{name}.png", full_page=True)  # type: ignore[attr-defined]
