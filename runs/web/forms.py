"""Form pieces every surface shares: plug-in parameter fields, domain errors."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from django import forms
from django.contrib.auth.models import AnonymousUser, User

from runs.access import Action, projects_where
from runs.errors import Conflict, InvalidInput
from runs.plugins import Param, Plugin, describe, number

# The user of a request: signed in or anonymous.
AnyUser = User | AnonymousUser


class PickField(forms.IntegerField):
    """The id of an object picked from a select; the form resolves it in scope."""

    widget = forms.Select

    def set_options(self, options: Iterable[tuple[int, str]]) -> None:
        options = list(options)
        self.widget.choices = [("", "---------"), *options]
        if len(options) == 1 and self.initial is None:
            self.initial = options[0][0]  # the only choice: preselect it


class MultilineField(forms.CharField):
    """Text typed in a textarea, its line breaks as ``\n``.

    Browsers send a textarea's line breaks as ``\r\n`` (HTML's form
    encoding): stored as they come, a prompt would reach a model with
    carriage returns that the same prompt given through the API has not.
    """

    widget = forms.Textarea

    def to_python(self, value: Any) -> str | None:
        text = super().to_python(value)
        return text.replace("\r\n", "\n").replace("\r", "\n") if text else text


class JSONTextField(forms.JSONField):
    """JSON typed in a textarea; empty (not ``null``) when there is no value."""

    def prepare_value(self, value: Any) -> Any:
        return "" if value is None else super().prepare_value(value)


def placeholder(example: Any) -> dict[str, str]:
    """The attributes that show an example as one: "e.g. ...", muted by CSS.

    A bare example in a field reads as a value already filled in.
    """
    if example is None or example == "":
        return {}
    text = example if isinstance(example, str) else json.dumps(example)
    return {"placeholder": f"e.g. {text}"}


def form_field[F: forms.Field](form: forms.BaseForm, name: str, kind: type[F]) -> F:
    """The form's own copy of a declared field, as the kind it was declared."""
    field = form.fields[name]
    if not isinstance(field, kind):
        raise TypeError(f"{name} is a {type(field).__name__}, not a {kind.__name__}")
    return field


def add_domain_error(form: forms.Form, exc: InvalidInput) -> None:
    """Show a service's InvalidInput on the form field it names (or the form).

    A form that turns its fields into a service's arguments records, in
    ``error_paths``, which field each argument path came from; an error on a
    path the form does not know lands on its nearest known parent.
    """
    form.add_error(_field_for(form, exc), str(exc))


def submitted[T](
    form: forms.Form, act: Callable[[], T], *, conflict_field: str | None = None
) -> T | None:
    """What ``act`` (the service call) returns once the bound form is valid.

    None when the form is unbound or invalid, or when the service refused the
    input: its InvalidInput is then shown on the form, as ``add_domain_error``;
    with a ``conflict_field``, a Conflict (a name taken) is shown on that field
    (``NON_FIELD_ERRORS``: the whole form) rather than raised.
    """
    if not (form.is_bound and form.is_valid()):
        return None
    try:
        return act()
    except InvalidInput as exc:
        add_domain_error(form, exc)
    except Conflict as exc:
        if conflict_field is None:
            raise
        form.add_error(conflict_field, str(exc))
    return None


def form_saved[T](
    form: forms.Form,
    save: Callable[..., T],
    /,
    *,
    conflict_field: str | None = None,
    **known: Any,
) -> T | None:
    """What ``save`` returns, called with ``known`` and the form's cleaned values.

    For a form whose fields are the service's remaining arguments, by name;
    None when it is not submitted, as ``submitted``.
    """
    return submitted(
        form, lambda: save(**known, **form.cleaned_data), conflict_field=conflict_field
    )


def _field_for(form: forms.Form, exc: InvalidInput) -> str | None:
    if exc.line is not None or getattr(exc, "record", None) is not None:
        return "file" if "file" in form.fields else None  # inside an uploaded file
    paths: dict[str, str] = getattr(form, "error_paths", {})
    path = exc.field or ""
    while path:
        if path in paths:
            return paths[path]
        if path in form.fields:
            return path
        path = _PARENT.sub("", path)
    return None


_PARENT = re.compile(r"(\.[^.\[]*|\[\d+\])$")


def param_field(param: Param, *, example: Any = None) -> forms.Field:
    """A form field for one declared parameter.

    Fields are never required, and bounds are only hints to the browser: the
    fields of a plug-in that is not chosen are ignored, and the declaration is
    checked once, by the service, whose error lands back on the field.
    """
    common: dict[str, Any] = {
        "label": param.label,
        "help_text": " ".join(
            part for part in (param.help, param.bounds and f"({param.bounds})") if part
        ),
        "required": False,
    }
    field: forms.Field
    if param.type == "boolean":
        field = forms.BooleanField(initial=param.default is True, **common)
    elif param.choices:
        choices = [(choice, choice) for choice in param.choices]
        if param.default is None:
            choices.insert(0, ("", "---------"))
        field = forms.ChoiceField(choices=choices, initial=param.default, **common)
    elif param.type in ("integer", "number"):
        attrs = {"step": "1" if param.type == "integer" else "any"}
        attrs |= {"min": number(param.minimum)} if param.minimum is not None else {}
        attrs |= {"max": number(param.maximum)} if param.maximum is not None else {}
        attrs |= placeholder(example)
        field = forms.CharField(
            widget=forms.NumberInput(attrs=attrs), initial=param.default, **common
        )
    elif param.type == "json":
        field = JSONTextField(
            widget=forms.Textarea(
                attrs={"rows": 3, "class": "mono", **placeholder(example)}
            ),
            initial=param.default,
            **common,
        )
    else:
        attrs = placeholder(example)
        if param.extra.get("widget") == "textarea":
            field = MultilineField(
                widget=forms.Textarea(attrs={"rows": 3, **attrs}),
                initial=param.default or None,
                strip=False,
                **common,
            )
        else:
            field = forms.CharField(
                widget=forms.TextInput(attrs=attrs),
                initial=param.default or None,
                strip=False,
                **common,
            )
    # Read by the field template (_param_field.html) to mark it "(required)".
    field.param_required = param.required  # type: ignore[union-attr]  # an attribute of our own
    return field


class PluginFieldsMixin:
    """Adds ``<kind>__<param>`` fields for plug-ins and collects their values."""

    fields: dict[str, forms.Field]
    cleaned_data: dict[str, Any]
    error_paths: dict[str, str]

    def add_plugin_fields(self, plugins: Mapping[str, type[Plugin]]) -> None:
        for kind, plugin in sorted(plugins.items()):
            for param in describe(plugin.Params):
                self.fields[f"{kind}__{param.name}"] = param_field(
                    param, example=plugin.example.get(param.name)
                )

    def plugin_values(
        self, kind: str, plugin: type[Plugin], *, path: str
    ) -> dict[str, Any]:
        """The chosen plug-in's parameters; empty fields take the default."""
        values: dict[str, Any] = {}
        for param in describe(plugin.Params):
            name = f"{kind}__{param.name}"
            self.error_paths[f"{path}.{param.name}"] = name
            value = self.cleaned_data.get(name)
            if value is not None and value != "":
                values[param.name] = value
        return values

    def plugin_sections(
        self, choice_field: str, plugins: Mapping[str, type[Plugin]]
    ) -> list[dict[str, Any]]:
        """For the template: each choice next to its plug-in's fields."""
        form: Any = self
        sections = []
        for choice in form[choice_field]:
            kind = str(choice.data["value"])
            plugin = plugins[kind]
            sections.append(
                {
                    "choice": choice,
                    "kind": kind,
                    # Plain values: a template would call a class.
                    "summary": plugin.summary(),
                    "headline": headline(plugin.summary()),
                    "fields": [
                        form[f"{kind}__{param.name}"]
                        for param in describe(plugin.Params)
                    ],
                }
            )
        return sections


# The end of a description's first sentence: a full stop before a capital,
# a parenthesis or an inline literal (so "e.g. foo" goes on).
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z(`])")


def headline(text: str) -> str:
    """A description's first sentence: what a form shows of it on one line."""
    return _SENTENCE_END.split(text, maxsplit=1)[0]


def project_options(user: AnyUser) -> list[tuple[int, str]]:
    return [(p.pk, p.name) for p in projects_where(user, Action.EDIT).order_by("name")]
