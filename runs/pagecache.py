"""Whole rendered pages, cached under everything they show.

Rendering a dashboard page through the template language costs more than
reading its data (bench/README.md). A view that has read its data cheaply
passes all of it as the key: two requests with the same key would render the
same bytes, so the second takes them from the cache. Nothing is invalidated
and nothing can be stale: data that changed makes another key. The time a
cached entry lives only bounds the memory it holds.

What the key always holds besides the view's data: the template, the user's
id and name (the page header), and the query string (pagination links repeat
it). What a page shows that differs on every request is left out of the
cached bytes: the CSRF token is rendered as a placeholder and filled in per
response. A page with messages to show is rendered and not cached (showing
them uses them up).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from django.contrib import messages
from django.core.cache import caches
from django.http import HttpRequest, HttpResponse
from django.middleware.csrf import get_token
from django.template.loader import render_to_string

# Letters and digits only: the same after HTML escaping, in an attribute or a
# JSON string, and never in a page by chance.
CSRF_PLACEHOLDER = "evalsiteCsrfPlaceholder0a1f5c9e2b7d"
PAGE_CACHE_SECONDS = 300


def page_key(request: HttpRequest, template_name: str, data: Any) -> str:
    user = request.user
    parts = (
        template_name,
        user.pk,
        user.get_username(),
        request.META.get("QUERY_STRING", ""),
        data,
    )
    digest = hashlib.blake2b(repr(parts).encode(), digest_size=20).hexdigest()
    return f"page:{digest}"


def render_cached(
    request: HttpRequest,
    template_name: str,
    context: Mapping[str, Any],
    *,
    key_data: Any,
    status: int = 200,
) -> HttpResponse:
    """``render(request, template_name, context)``, from the cache when a page
    with the same ``key_data`` (everything the context shows, as values with
    a faithful ``repr``) was rendered for this user before."""
    cache = caches["default"]
    cacheable = not len(messages.get_messages(request))
    key = page_key(request, template_name, key_data) if cacheable else ""
    body = cache.get(key) if cacheable else None
    if body is None:
        body = render_to_string(
            template_name,
            {**context, "csrf_token": CSRF_PLACEHOLDER},
            request=request,
        )
        if cacheable:
            cache.set(key, body, PAGE_CACHE_SECONDS)
    return HttpResponse(
        body.replace(CSRF_PLACEHOLDER, get_token(request)), status=status
    )
