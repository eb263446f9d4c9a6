"""The catalogue page: every target and scorer kind with its parameters."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from runs.catalogue.kinds import plugin_catalogue


@require_GET
def catalogue(request: HttpRequest) -> HttpResponse:
    """Every target kind and scorer with its parameters, example and store."""
    return render(request, "runs/catalogue/catalogue.html", plugin_catalogue())
