"""Pages' URL entries, declared as tables of routes and views."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.urls import URLPattern, path


def page(route: str, view: Callable[..., Any], *, name: str = "") -> URLPattern:
    """The URL of a page, named after its view unless a name is given.

    One name for the view and its URL keeps ``reverse("runs:<view>")`` greppable.
    """
    return path(route, view, name=name or view.__name__)
