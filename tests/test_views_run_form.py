"""The new-run form as a person reads it: folded descriptions, examples, literals."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import reverse

from runs.models import Project
from runs.scorers import REGISTRY as SCORERS

pytestmark = pytest.mark.django_db


def _form(client: Client) -> str:
    response = client.get(reverse("runs:run_new"))
    assert response.status_code == 200
    return response.content.decode()


def test_each_long_scorer_description_is_folded_to_its_first_sentence(
    bob_client: Client, project: Project
) -> None:
    page = _form(bob_client)
    regex = re.search(
        r'<div class="plugin" id="plugin-regex">\s*<details class="plugin-about">'
        r"\s*<summary>(.*?)</summary>\s*<p[^>]*>(.*?)</p>\s*</details>",
        page,
        re.DOTALL,
    )

    assert regex, "the regex scorer's description is not folded"
    summary, full = regex.groups()
    assert 'type="checkbox" name="scorers" value="regex"' in summary
    assert "Regular expression" in summary or SCORERS["regex"].label in summary
    assert "Passes when the output matches <code>pattern</code>" in summary
    assert "fullmatch" not in summary and "fullmatch" in full
    # Every scorer is folded: none of the long descriptions is shown open.
    assert page.count('<details class="plugin-about">') == len(SCORERS)
    assert '<details class="plugin-about" open' not in page


def test_more_scorers_starts_empty_not_null(
    bob_client: Client, project: Project
) -> None:
    page = _form(bob_client)
    field = re.search(
        r'<textarea name="scorer_specs"[^>]*>(.*?)</textarea>', page, re.S
    )

    assert field and field.group(1).strip() == ""


def test_examples_read_as_examples_not_values(
    bob_client: Client, project: Project
) -> None:
    page = bob_client.get(reverse("runs:target_list")).content.decode()

    assert 'name="demo__accuracy"' in page
    assert 'placeholder="e.g. 0.8"' in page
    assert 'placeholder="e.g. gpt-4o-mini"' in page
    assert re.search(r'placeholder="(?!e\.g\. )', page) is None


def test_double_backticks_show_as_code_and_stay_escaped(
    victor_client: Client,
) -> None:
    catalogue = victor_client.get(reverse("runs:catalogue")).content.decode()

    assert "``" not in catalogue.replace("```", "")
    assert "<code>pattern</code>" in catalogue
    # A fence is left alone; markup inside a literal is escaped, not run.
    assert "```json" in catalogue
    assert "<code><" not in catalogue
