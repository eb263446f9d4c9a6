"""What every router shares: the API class, its error maps and its pagination."""

from __future__ import annotations

import logging
import typing
from collections.abc import Callable
from typing import Annotated, Any

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.urls import URLPattern, URLResolver
from ninja import Field, NinjaAPI, Schema
from ninja.openapi.docs import Swagger
from ninja.operation import Operation
from ninja.pagination import PageNumberPagination, paginate

from runs.web.schemas import ErrorOut, ValidationErrorOut

PAGE_SIZE = 50
MAX_PAGE_SIZE = 500
# Far beyond any real list, and small enough that an offset never overflows.
MAX_PAGE = 1_000_000
# Pages for people keep the site-wide login redirect; API calls answer 401. The
# schema and its docs page check access themselves (``projects.api.docs_access``).
LOGIN_REDIRECTED_URL_NAMES = frozenset({"api-root"})
# Every status an operation can answer, for the schema: reads ...
READ_ERRORS: dict[int, Any] = {
    401: ErrorOut,
    404: ErrorOut,
    422: ValidationErrorOut,
}
# ... and writes (400: bad input or an unreadable body; 403: a viewer, or a
# session without its CSRF token; 413: a body over the size limit).
ERRORS: dict[int, Any] = {
    **READ_ERRORS,
    400: ErrorOut,
    403: ErrorOut,
    409: ErrorOut,
    413: ErrorOut,
}

# Reads whose query parameters are checked beyond their types answer 400 too.
ERRORS_READ_FILTERED: dict[int, Any] = {**READ_ERRORS, 400: ErrorOut}

logger = logging.getLogger(__name__)


class BoundedPageNumberPagination(PageNumberPagination):
    class Input(Schema):
        page: int = Field(1, ge=1, le=MAX_PAGE)
        page_size: Annotated[int, Field(ge=1, le=MAX_PAGE_SIZE)] | None = None

    def bounds(self, pagination: Any) -> tuple[int, int]:
        """The offset and the size of the page asked for."""
        page_size = self._get_page_size(pagination.page_size)
        return (pagination.page - 1) * page_size, page_size

    def paginate_queryset(
        self, queryset: Any, pagination: Any, request: Any, **params: Any
    ) -> Any:
        """Counted first, and a page past the end is not read: a filter that
        matches nothing would otherwise walk a whole run in dataset order
        (the order an index gives) to fill its page."""
        count = self._items_count(queryset)
        offset, page_size = self.bounds(pagination)
        items = queryset[offset : offset + page_size] if offset < count else []
        return {self.items_attribute: items, "count": count}


# This API's pages, for the views that page themselves (to answer from a
# cache) as ``@paginated`` pages the others.
PAGES = BoundedPageNumberPagination(page_size=PAGE_SIZE, max_page_size=MAX_PAGE_SIZE)
_paginate = paginate(
    BoundedPageNumberPagination, page_size=PAGE_SIZE, max_page_size=MAX_PAGE_SIZE
)


def paged_output(name: str, item: Any) -> type[Schema]:
    """The schema ``@paginated`` makes of ``list[item]``, under the name ninja
    gives it (``Paged<item>``), for a view that pages itself."""
    return type(
        name,
        (BoundedPageNumberPagination.Output,),
        {"__annotations__": {"items": list[item]}},
    )


def paginated[View: Callable[..., Any]](view: View) -> View:
    """django-ninja's pagination with this API's bounds.

    ninja reads a paginated view's annotations among the names of its own
    module, not the view's: they are resolved here, where the view's names are
    known.
    """
    view.__annotations__ = typing.get_type_hints(view, include_extras=True)
    return _paginate(view)


class SiteSwagger(Swagger):
    """ninja's Swagger page with the assets of this site, never a CDN's.

    ninja renders its ``template`` only when it is an installed app, which it
    is not (settings.py says why); otherwise it renders the file
    ``template_cdn`` names: here the same page, whose assets are found as
    this site's static files.
    """

    template_cdn = str(settings.NINJA_DIR / "templates" / "ninja" / "swagger.html")


class EvalsiteAPI(NinjaAPI):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**{"docs": SiteSwagger()} | kwargs)

    def get_openapi_operation_id(self, operation: Operation) -> str:
        # The ids clients know (``runs_api_list_runs``), wherever the code lives.
        return f"runs_api_{operation.view_func.__name__}"

    @property
    def urls(self) -> tuple[list[URLPattern | URLResolver], str, str]:
        patterns, app_name, namespace = super().urls
        for pattern in patterns:
            if (
                isinstance(pattern, URLPattern)
                and pattern.name not in LOGIN_REDIRECTED_URL_NAMES
            ):
                login_not_required(pattern.callback)
        return patterns, app_name, namespace
