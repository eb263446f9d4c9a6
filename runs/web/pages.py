"""What every page shares: domain errors as HTTP, pagination, ids from queries."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, cast

from asgiref.sync import iscoroutinefunction
from django.core.exceptions import PermissionDenied
from django.core.paginator import Page, Paginator
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponseBase

from runs.errors import Forbidden, NotFound
from runs.web.schemas import MAX_DB_INT

MAX_PAGE = 1_000_000
MAX_PAGE_DIGITS = len(str(MAX_PAGE))


def domain_errors[View: Callable[..., Any]](view: View) -> View:
    """Show NotFound as 404 and Forbidden as 403, once for every page."""
    if iscoroutinefunction(view):

        @functools.wraps(view)
        async def async_wrapper(
            request: HttpRequest, *args: Any, **kwargs: Any
        ) -> HttpResponseBase:
            try:
                return await view(request, *args, **kwargs)  # type: ignore[no-any-return]
            except NotFound as exc:
                raise Http404(str(exc)) from exc
            except Forbidden as exc:
                raise PermissionDenied(str(exc)) from exc

        return cast(View, async_wrapper)

    @functools.wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        try:
            return view(request, *args, **kwargs)  # type: ignore[no-any-return]
        except NotFound as exc:
            raise Http404(str(exc)) from exc
        except Forbidden as exc:
            raise PermissionDenied(str(exc)) from exc

    return cast(View, wrapper)


def page_of(request: HttpRequest, queryset: QuerySet[Any], per_page: int) -> Page:
    # Anything but a page number in range shows the first or the last page.
    number = request.GET.get("page", "")
    if not (number.isascii() and number.isdigit()):
        page = 1
    elif len(number) > MAX_PAGE_DIGITS:
        page = MAX_PAGE
    else:
        page = min(int(number), MAX_PAGE)
    return Paginator(queryset, per_page).get_page(min(page, MAX_PAGE))


def query_id(value: str | None) -> int | None:
    """A database id from the query string, or None (never one out of range)."""
    if not (value and value.isascii() and value.isdigit()):
        return None
    if len(value) > len(str(MAX_DB_INT)):
        return None
    number = int(value)
    return number if 1 <= number <= MAX_DB_INT else None
