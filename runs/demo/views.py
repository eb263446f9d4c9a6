"""The demo's start: a run against the offline demo model."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from runs.demo.seed import demo_run_start
from runs.errors import InvalidInput
from runs.web.requests import AuthedRequest


@require_POST
def run_demo_start(request: AuthedRequest) -> HttpResponse:
    """Start the demo run and show it live; the new-run form if it cannot start."""
    try:
        run = demo_run_start(user=request.user)
    except InvalidInput as exc:
        messages.error(request, f"The demo run could not start: {exc}")
        return redirect(f"{reverse('runs:run_new')}?demo=1")
    return redirect("runs:run_detail", run_id=run.pk)
