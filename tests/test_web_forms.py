"""A form's values handed to a service (runs/web/forms.py)."""

from __future__ import annotations

from typing import Any

import pytest
from django import forms
from django.core.exceptions import NON_FIELD_ERRORS

from runs.errors import Conflict, InvalidInput
from runs.web.forms import form_saved, submitted


class NameForm(forms.Form):
    name = forms.CharField(max_length=10)


def echo(**arguments: Any) -> dict[str, Any]:
    return arguments


def refuse(**arguments: Any) -> None:
    raise InvalidInput("is taken", field="name")


def test_form_saved_calls_the_service_with_what_is_known_and_the_fields() -> None:
    form = NameForm({"name": "alpha"})

    assert form_saved(form, echo, owner="bob") == {"owner": "bob", "name": "alpha"}


def test_form_saved_leaves_an_unbound_or_invalid_form_alone() -> None:
    assert form_saved(NameForm(None), echo) is None
    invalid = NameForm({"name": "x" * 11})
    assert form_saved(invalid, echo) is None
    assert "name" in invalid.errors


def test_form_saved_shows_the_service_refusal_on_its_field() -> None:
    form = NameForm({"name": "alpha"})

    assert form_saved(form, refuse) is None
    assert "is taken" in form.errors["name"][0]


def taken() -> None:
    raise Conflict("a thing named alpha exists")


def test_submitted_shows_a_conflict_on_the_field_it_is_told() -> None:
    form = NameForm({"name": "alpha"})

    assert submitted(form, taken, conflict_field="name") is None
    assert form.errors["name"] == ["a thing named alpha exists"]


def test_submitted_shows_a_conflict_on_the_whole_form() -> None:
    form = NameForm({"name": "alpha"})

    assert submitted(form, taken, conflict_field=NON_FIELD_ERRORS) is None
    assert form.non_field_errors() == ["a thing named alpha exists"]


def test_submitted_raises_a_conflict_it_is_not_told_where_to_show() -> None:
    with pytest.raises(Conflict):
        submitted(NameForm({"name": "alpha"}), taken)
