"""Whole rendered pages, cached under everything they show.

Rendering a dashboard page through the template language costs more than
reading its data (bench/README.md). A view that has read its data cheaply
passes all of it as the key: two requests with the same key would render the
same bytes, so the second takes them from the cache. Nothing is invalidated
and nothing can be stale: data that changed makes another key. The time a
cached entry lives only bounds the memory it holds. The one exception is a
going run's page, keyed by the window it is rendered in: while another
thread refreshes a going value, a reader that misses takes the latest
rendering of the same page instead (``single_flight.current``).

What the key always holds besides the view's data: the template, the user's
id and name (the page header), and the query string (pagination links repeat
it). What a page shows that differs on every request is left out of the
cached bytes: the CSRF token is rendered as a placeholder, a random one for
each rendering, and the page is kept as the parts between its placeholders;
each response joins them with its own token. No text on the page (a run's
name, say) can stand for the token: it cannot know the placeholder. A page
with messages to show is rendered and not cached (showing them uses them up).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from django.contrib import messages
from django.core.cache import caches
from django.http import HttpRequest, HttpResponse
from django.middleware.csrf import get_token
from django.template.loader import render_to_string
from ninja.renderers import JSONRenderer

from runs.records import cache_keys, single_flight

if TYPE_CHECKING:
    from ninja import Schema

# Letters and digits only: the same after HTML escaping, in an attribute or a
# JSON string. The random part is new for every rendering.
CSRF_PLACEHOLDER_PREFIX = "evalsiteCsrf"
PAGE_CACHE_SECONDS = 300


def page_key(request: HttpRequest, template_name: str, data: Any) -> str:
    user = request.user
    return cache_keys.page(
        template=template_name,
        user_id=user.pk,
        username=user.get_username(),
        query=request.META.get("QUERY_STRING", ""),
        data=data,
    )


def render_cached(
    request: HttpRequest,
    template_name: str,
    build: Callable[[], tuple[Mapping[str, Any], int]],
    *,
    key_data: Any,
    still_current: Callable[[], Any] | None = None,
) -> HttpResponse:
    """``render(request, template_name, context, status=status)`` with the
    ``(context, status)`` that ``build()`` returns; from the cache when a
    page with the same ``key_data`` (everything the page shows, as the
    typed parts ``cache_keys.key`` takes) was rendered for this user before, and then
    without calling ``build``. ``key_data=None``: not cached.

    ``still_current()`` re-reads the key's data after a build: if a write
    came in between, the page (which may show it) is sent but not cached
    under the older key.
    """
    cache = caches["default"]
    cacheable = key_data is not None and not len(messages.get_messages(request))
    key = page_key(request, template_name, key_data) if cacheable else ""
    cached = cache.get(key) if cacheable else None

    def rendered() -> tuple[tuple[str, ...], int]:
        context, status = build()
        placeholder = CSRF_PLACEHOLDER_PREFIX + secrets.token_hex(16)
        body = render_to_string(
            template_name, {**context, "csrf_token": placeholder}, request=request
        )
        page = (tuple(body.split(placeholder)), status)
        if cacheable and (still_current is None or still_current() == key_data):
            cache.set(key, page, PAGE_CACHE_SECONDS)
        return page

    if cached is None:
        # Requests that miss the same page at once share one rendering: the
        # key holds what it shows, so theirs would be the same bytes (a going
        # run's page may be its latest rendering: single_flight.current).
        cached = single_flight.current(key, rendered) if cacheable else rendered()
    parts, status = cached
    return HttpResponse(get_token(request).join(parts), status=status)


def render_current(
    request: HttpRequest,
    template_name: str,
    build: Callable[[], tuple[Mapping[str, Any], int]],
    *,
    state: Callable[[], Any],
) -> HttpResponse:
    """``render_cached`` keyed by what ``state()`` reads before the build, and
    kept only if it reads the same after it (its ``still_current``)."""
    return render_cached(
        request, template_name, build, key_data=state(), still_current=state
    )


# What the API renders with (its default renderer), and its content type.
_JSON = JSONRenderer()
JSON_CONTENT_TYPE = f"{_JSON.media_type}; charset={_JSON.charset}"


def json_cached(
    request: HttpRequest,
    *,
    name: str,
    key_data: Any,
    schema: type[Schema],
    build: Callable[[], Any],
    still_current: Callable[[], Any] | None = None,
) -> HttpResponse:
    """A 200 JSON answer: ``build()`` validated by ``schema`` and rendered as
    django-ninja renders it, from the cache when the same ``key_data`` was
    answered to this user before (``key_data``: typed parts, as for
    ``render_cached``; None: not cached).

    ``still_current()`` re-reads the key's data after a build: if a write
    came in between, the answer (which may show it) is sent but not cached
    under the older key.
    """
    cache = caches["default"]
    cacheable = key_data is not None
    key = (
        cache_keys.api_answer(name=name, user_id=request.user.pk, data=key_data)
        if cacheable
        else ""
    )
    body = cache.get(key) if cacheable else None

    def rendered() -> str:
        context = {"request": request, "response_status": 200}
        valid = schema.model_validate(build(), context=context)
        content: str = _JSON.render(
            request, valid.model_dump(context=context), response_status=200
        )
        if cacheable and (still_current is None or still_current() == key_data):
            cache.set(key, content, PAGE_CACHE_SECONDS)
        return content

    if body is None:
        body = single_flight.current(key, rendered) if cacheable else rendered()
    return HttpResponse(body, content_type=JSON_CONTENT_TYPE)
