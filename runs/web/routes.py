"""Pages' URL entries, declared as tables of routes and views."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.urls import URLPattern, path

from runs.web.pages import domain_errors


def page(route: str, view: Callable[..., Any], *, name: str = "") -> URLPattern:
    """The URL of a page, named after its view unless a name is given.

    Every page shows the domain's NotFound as 404 and Forbidden as 403: the
    mapping is made here, once, rather than on each view. One name for the view
    and its URL keeps ``reverse("runs:<view>")`` greppable.
    """
    return path(route, domain_errors(view), name=name or view.__name__)
