"""The request types of signed-in pages and of authenticated API calls.

Django types ``request.user`` as a user or ``AnonymousUser``; past the
site-wide ``LoginRequiredMiddleware`` a page's request has a user, and past the
API's authentication ninja sets ``request.auth`` to that user
(``ApiKeyAuth`` and ``django_auth`` both answer the user).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.contrib.auth.models import User
from django.http import HttpRequest


class AuthedRequest(HttpRequest):
    """A request to a page that needs a signed-in person (every page but log-in)."""

    user: User

    if TYPE_CHECKING:
        # Types only: these classes describe requests, they are never made.
        async def auser(self) -> User: ...


class ApiRequest(HttpRequest):
    """A request to an API operation, past its authentication."""

    auth: User
    user: User
