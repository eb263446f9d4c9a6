"""What a person sees when log-in attempts are throttled (django-axes).

Axes refuses the attempt; this renders the log-in page again with the reason,
for the dashboard's log-in and the admin's alike.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth.forms import AuthenticationForm
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


def lockout_message(cool_off_minutes: int) -> str:
    unit = "minute" if cool_off_minutes == 1 else "minutes"
    return (
        "Too many failed log-in attempts for this username from your address. "
        f"Log-in is refused for {cool_off_minutes} {unit}, even with the right "
        "password; try again later."
    )


def lockout_response(
    request: HttpRequest, original_response: Any = None, credentials: Any = None
) -> HttpResponse:
    """The log-in page with the lockout reason, as 429 Too Many Requests."""
    minutes = max(1, round(settings.AXES_COOLOFF_TIME.total_seconds() / 60))
    username = request.POST.get("username", "")
    context = {
        "form": AuthenticationForm(request, initial={"username": username}),
        "lockout": lockout_message(minutes),
        "next": request.POST.get("next") or request.GET.get("next", ""),
    }
    return render(
        request,
        "registration/login.html",
        context,
        # django-axes puts its defaults on settings when it loads.
        status=settings.AXES_HTTP_RESPONSE_CODE,  # type: ignore[misc]  # axes sets it
    )
