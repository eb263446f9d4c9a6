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
