"""In a real browser: a plug-in's fields show only while it is chosen, no script."""

from __future__ import annotations

import re

import pytest

from tests.browser import signed_in_page

pytestmark = pytest.mark.browser


def test_chosen_plugins_show_their_fields_and_others_hide(server: str) -> None:
    with signed_in_page(server, viewport={"width": 1280, "height": 1000}) as (
        page,
        _,
    ):
        page.goto(f"{server}/targets/")
        assert page.is_visible("#id_openai_chat__base_url")
        assert page.is_hidden("#id_demo__accuracy")
        page.check("input[name=kind][value=demo]")
        assert page.is_visible("#id_demo__accuracy")
        assert page.is_hidden("#id_openai_chat__base_url")

        page.goto(f"{server}/runs/new/")
        assert page.is_hidden("#id_regex__pattern")
        page.check("input[name=scorers][value=regex]")
        assert page.is_visible("#id_regex__pattern")
        page.uncheck("input[name=scorers][value=exact_match]")
        assert page.is_hidden("#id_exact_match__strip")
        page.select_option("#id_dataset", label="Browser / sums v1 (40 items)")
        page.select_option("#id_target", label="Browser / Demo model (demo)")
        page.fill("#id_regex__pattern", r"^\d+$")
        page.click("button[type=submit].primary")
        page.wait_for_url(re.compile(r"/runs/\d+/$"))
        assert "regex" in page.inner_text("main")


def test_scorer_descriptions_fold_and_open_from_the_keyboard(server: str) -> None:
    with signed_in_page(server, viewport={"width": 1280, "height": 1000}) as (
        page,
        _,
    ):
        page.goto(f"{server}/runs/new/")
        regex = page.locator("#plugin-regex")
        full = regex.locator("details.plugin-about > p")
        # Folded: the first sentence beside the choice, the rest hidden.
        assert regex.locator("summary").is_visible()
        assert "matches pattern" in regex.locator("summary").inner_text()
        assert full.is_hidden()
        scorers = page.locator("fieldset:has(legend:text('Scorers'))")
        assert scorers.bounding_box()["height"] < 1400  # was about 2,800 px

        # The checkbox takes Space and leaves the description folded ...
        box = page.locator("input[name=scorers][value=regex]")
        box.focus()
        page.keyboard.press("Space")
        assert box.is_checked() and full.is_hidden()
        assert page.is_visible("#id_regex__pattern")
        # ... and the summary, one Tab stop back, opens it with Enter.
        page.keyboard.press("Shift+Tab")
        assert page.evaluate("document.activeElement.tagName") == "SUMMARY"
        page.keyboard.press("Enter")
        assert full.is_visible() and "fullmatch" in full.inner_text()
        assert box.is_checked()
