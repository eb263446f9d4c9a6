"""Pages' URL entries, declared as tables of routes and views."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from django.urls import URLPattern, path, register_converter
from django.urls.converters import get_converters

from runs.web.converters import IdConverter
from runs.web.pages import domain_errors

# Registered where page URLs are declared, before the first is made (Django
# parses a route when it is made), rather than at set-up: a process that
# serves no page (evalrun, evalworker, migrate) imports none of the web layer.
if "id" not in get_converters():
    register_converter(IdConverter, "id")


def page(route: str, view: Callable[..., Any], *, name: str = "") -> URLPattern:
    """The URL of a page, named after its view unless a name is given.

    Every page shows the domain's NotFound as 404 and Forbidden as 403: the
    mapping is made here, once, rather than on each view. One name for the view
    and its URL keeps ``reverse("runs:<view>")`` greppable.
    """
    return path(route, domain_errors(view), name=name or view.__name__)


def pages(prefix: str, views: Mapping[str, Callable[..., Any]]) -> list[URLPattern]:
    """The pages below one prefix, each route given relative to it, as ``page``.

    An object's pages name its path and its id's converter once, in the prefix,
    rather than once per page.
    """
    return [page(prefix + route, view) for route, view in views.items()]
