"""Small response middleware; each works in sync and async mode without thread hops."""

from __future__ import annotations

import io
from collections.abc import Awaitable, Callable
from http import HTTPStatus
from typing import cast

from asgiref.sync import iscoroutinefunction, markcoroutinefunction, sync_to_async
from django.conf import settings
from django.http import HttpRequest, HttpResponse, HttpResponseBase, JsonResponse
from django.http.multipartparser import MultiPartParser, MultiPartParserError
from django.utils.csp import CSP, build_policy
from django.utils.html import escape
from whitenoise.middleware import WhiteNoiseMiddleware

# A middleware answers a response in a sync chain and an awaitable in an async one.
Answer = HttpResponseBase | Awaitable[HttpResponseBase]
GetResponse = Callable[[HttpRequest], Answer]


class _EitherMode:
    """A middleware that runs in the chain's mode, sync or async."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: GetResponse) -> None:
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> Answer:
        raise NotImplementedError


class _ResponseMiddleware(_EitherMode):
    def __call__(self, request: HttpRequest) -> Answer:
        if self.is_async:
            return self._acall(request)
        # A sync chain: the next middleware answers a response.
        response = cast(HttpResponseBase, self.get_response(request))
        return self.process(request, response)

    async def _acall(self, request: HttpRequest) -> HttpResponseBase:
        # An async chain: the next middleware answers an awaitable.
        response = await cast(Awaitable[HttpResponseBase], self.get_response(request))
        return self.process(request, response)

    def process(
        self, request: HttpRequest, response: HttpResponseBase
    ) -> HttpResponseBase:
        raise NotImplementedError


class ApiJsonErrors(_ResponseMiddleware):
    """Under /api/, an error is JSON whoever produced it (an unknown URL, a
    method not allowed, a CSRF failure, a server error)."""

    def process(
        self, request: HttpRequest, response: HttpResponseBase
    ) -> HttpResponseBase:
        if (
            response.status_code < 400
            or not request.path_info.startswith("/api/")
            or response.get("Content-Type", "").startswith("application/json")
        ):
            return response
        try:
            detail = HTTPStatus(response.status_code).phrase
        except ValueError:
            detail = response.reason_phrase
        replaced = JsonResponse({"detail": detail}, status=response.status_code)
        for header in ("Allow", "WWW-Authenticate", "Retry-After", "Vary"):
            if header in response:
                replaced[header] = response[header]
        return replaced


class PrivateCacheControl(_ResponseMiddleware):
    """Nothing answered to a signed-in person or an API key is stored by a cache.

    Decided from the request's credentials (a session cookie or an
    Authorization header), without loading the session. Static files are
    served before this middleware and keep their own caching.
    """

    def process(
        self, request: HttpRequest, response: HttpResponseBase
    ) -> HttpResponseBase:
        if response.has_header("Cache-Control"):
            return response
        if (
            settings.SESSION_COOKIE_NAME in request.COOKIES
            or "Authorization" in request.headers
            or response.cookies
        ):
            response["Cache-Control"] = "private, no-store"
        return response


class ContentSecurityPolicy(_ResponseMiddleware):
    """``SECURE_CSP`` and ``SECURE_CSP_REPORT_ONLY`` as Django's own
    ContentSecurityPolicyMiddleware applies them (including the per-view
    overrides of ``django.views.decorators.csp``), without its two thread hops
    per request in async mode. The policy uses no nonce."""

    def process(
        self, request: HttpRequest, response: HttpResponseBase
    ) -> HttpResponseBase:
        for header, config in (
            (CSP.HEADER_ENFORCE, getattr(response, "_csp_config", settings.SECURE_CSP)),
            (
                CSP.HEADER_REPORT_ONLY,
                getattr(response, "_csp_ro_config", settings.SECURE_CSP_REPORT_ONLY),
            ),
        ):
            if config and header not in response:
                response.headers[str(header)] = build_policy(config)
        return response


class StaticFiles(WhiteNoiseMiddleware):
    """WhiteNoise, able to run in async mode too.

    WhiteNoise is sync-only: in an async middleware chain Django would run it
    on a thread and keep that thread until the view's response came back. The
    async chain serves only coroutine views (evalsite/handlers.py), so a
    request passes straight through, and a static file, if one matched, is
    served from a worker thread.
    """

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: GetResponse) -> None:
        super().__init__(get_response)
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> Answer:
        if self.is_async:
            return self._acall(request)
        return super().__call__(request)

    async def _acall(self, request: HttpRequest) -> HttpResponseBase:
        if self.autorefresh:
            static_file = await sync_to_async(self.find_file, thread_sensitive=False)(
                request.path_info
            )
        else:
            static_file = self.files.get(request.path_info)
        if static_file is None:
            return await self.get_response(request)
        return await sync_to_async(self.serve, thread_sensitive=False)(
            static_file, request
        )


class MultipartHeader(_EitherMode):
    """A multipart/form-data request whose Content-Type Django cannot parse by
    (no boundary, a malformed one) gets 400 and a message, before any view.

    Django finds out only when a view first reads the form; django-ninja
    turned that into a server error. The check is Django's own (its parser's
    constructor reads nothing).
    """

    def __call__(self, request: HttpRequest) -> Answer:
        refused = _multipart_refusal(request)
        if refused is None:
            return self.get_response(request)
        return _ready(refused) if self.is_async else refused


async def _ready(response: HttpResponseBase) -> HttpResponseBase:
    return response


MULTIPART_HELP = (
    "the request's Content-Type is multipart/form-data without a valid "
    "boundary parameter; let the HTTP client encode the form (e.g. curl -F)"
)


def _multipart_refusal(request: HttpRequest) -> HttpResponseBase | None:
    if request.content_type != "multipart/form-data":
        return None
    try:
        MultiPartParser(request.META, io.BytesIO(), [])
    except MultiPartParserError as exc:
        detail = MULTIPART_HELP if "boundary" in str(exc) else str(exc)
    else:
        return None
    if request.path_info.startswith("/api/"):
        return JsonResponse({"detail": detail}, status=400)
    page = (
        "<!doctype html><html lang=en><meta charset=utf-8>"
        "<title>Bad request</title><h1>Bad request</h1>"
        # Only the first letter raised: capitalize() would lower the rest
        # (curl -F becoming curl -f, another option).
        f"<p>{escape(detail[:1].upper() + detail[1:])}.</p></html>"
    )
    return HttpResponse(page, status=400)
