"""What every page shares: domain errors as HTTP, pagination, ids from queries."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Protocol, cast

from asgiref.sync import iscoroutinefunction, sync_to_async
from django.core.exceptions import PermissionDenied
from django.core.paginator import Page, Paginator
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBase
from django.utils.log import log_response
from django.views.defaults import permission_denied

from runs.access import Action
from runs.errors import Forbidden, NotFound
from runs.web.schemas import MAX_DB_INT

MAX_PAGE = 1_000_000
MAX_PAGE_DIGITS = len(str(MAX_PAGE))


class Pageable(Protocol):
    """What a page lists: a queryset, or a read that counts and slices like one."""

    def __len__(self) -> int: ...

    def __getitem__(self, index: slice, /) -> Any: ...


def posted(request: HttpRequest, action: Action) -> Action:
    """What a page's request asks to do: ``action`` on a POST, else to view.

    A page that shows a form to every member and takes it from some is looked
    up with this action, so that a member below the role is refused before
    the form is read rather than shown its errors.
    """
    return action if request.method == "POST" else Action.VIEW


def log_refusal(request: HttpRequest, response: HttpResponse, exc: Exception) -> None:
    """Log a refusal of the access policy as the expected answer it is.

    Django would log a 403 as a warning with the traceback of the refusal
    (two, chained): one line at INFO says who was refused what.
    """
    log_response(
        "Forbidden (%s): %s",
        exc,
        request.path,
        response=response,
        request=request,
        level="info",
    )


def refused(request: HttpRequest, exc: Forbidden) -> HttpResponse:
    """The 403 page for a refusal of the access policy, logged at INFO."""
    response = permission_denied(request, PermissionDenied(str(exc)))
    log_refusal(request, response, exc)
    return response


def domain_errors[View: Callable[..., Any]](view: View) -> View:
    """Show NotFound as 404 and Forbidden as 403, once for every page."""
    if iscoroutinefunction(view):

        @functools.wraps(view)
        async def async_wrapper(
            request: HttpRequest, *args: Any, **kwargs: Any
        ) -> HttpResponseBase:
            try:
                return await view(request, *args, **kwargs)
            except NotFound as exc:
                raise Http404(str(exc)) from exc
            except Forbidden as exc:
                return await sync_to_async(refused)(request, exc)

        return cast(View, async_wrapper)

    @functools.wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        try:
            return view(request, *args, **kwargs)
        except NotFound as exc:
            raise Http404(str(exc)) from exc
        except Forbidden as exc:
            return refused(request, exc)

    return cast(View, wrapper)


def page_of(request: HttpRequest, queryset: Pageable, per_page: int) -> Page[Any]:
    # Anything but a page number in range shows the first or the last page.
    number = request.GET.get("page", "")
    if not (number.isascii() and number.isdigit()):
        page = 1
    elif len(number) > MAX_PAGE_DIGITS:
        page = MAX_PAGE
    else:
        page = min(int(number), MAX_PAGE)
    # Paginator only counts and slices; its stubs ask for a whole sequence.
    paginator: Paginator[Any] = Paginator(queryset, per_page)  # type: ignore[arg-type]  # see above
    return paginator.get_page(min(page, MAX_PAGE))


def query_id(value: str | None) -> int | None:
    """A database id from the query string, or None (never one out of range)."""
    if not (value and value.isascii() and value.isdigit()):
        return None
    if len(value) > len(str(MAX_DB_INT)):
        return None
    number = int(value)
    return number if 1 <= number <= MAX_DB_INT else None
