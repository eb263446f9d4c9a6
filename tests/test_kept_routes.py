"""Every API operation (method, path, operation id) and every page URL (name,
route) that evalsite had before its modules moved into capability packages
(``routes_kept.txt``, read from ``f6749c8``) is still there: clients, links
and bookmarks made then keep working."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from django.urls import URLPattern, URLResolver, get_resolver

from runs.api import api

KEPT = Path(__file__).with_name("routes_kept.txt")


def kept(kind: str) -> set[str]:
    prefix = f"{kind} "
    return {
        line.removeprefix(prefix)
        for line in KEPT.read_text().splitlines()
        if line.startswith(prefix)
    }


def operations() -> set[str]:
    schema = api.get_openapi_schema(path_prefix="/api/v1/")
    return {
        f"{method.upper()} {path} {operation.get('operationId')}"
        for path, methods in schema["paths"].items()
        for method, operation in methods.items()
    }


def url_routes(
    patterns: list[Any], prefix: str = "", namespace: str = ""
) -> Iterator[str]:
    """``namespace:name route`` of every URL pattern."""
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            inner = pattern.namespace or namespace
            yield from url_routes(
                pattern.url_patterns, prefix + str(pattern.pattern), inner
            )
        elif isinstance(pattern, URLPattern):
            yield f"{namespace}:{pattern.name} {prefix}{pattern.pattern}"


def test_every_api_operation_of_before_is_kept() -> None:
    assert len(kept("op")) == 41
    assert sorted(kept("op") - operations()) == []


def test_every_page_url_of_before_is_kept() -> None:
    assert len(kept("url")) == 80
    assert sorted(kept("url") - set(url_routes(get_resolver().url_patterns))) == []
