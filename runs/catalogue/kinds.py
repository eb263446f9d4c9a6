"""The catalogue of plug-ins: what the page and the API say about each kind."""

from __future__ import annotations

import json
from typing import Any

from runs.plugins import Plugin, catalogue_entry, describe
from runs.plugins.scorers import SCORERS
from runs.plugins.targets import TARGETS
from runs.plugins.tools import TOOLS


def scorer_kinds() -> list[dict[str, Any]]:
    """``GET /api/v1/scorers``: every scorer kind, by kind."""
    return [catalogue_entry(cls) for _, cls in sorted(SCORERS.items())]


def target_kinds() -> list[dict[str, Any]]:
    """``GET /api/v1/targets/kinds``: every target kind, by kind."""
    return [catalogue_entry(cls) for _, cls in sorted(TARGETS.items())]


def tool_kinds() -> list[dict[str, Any]]:
    """``GET /api/v1/tools``: every tool kind an agent may use, by kind."""
    return [
        {**catalogue_entry(cls), "arguments": cls.arguments, "final": cls.final}
        for _, cls in sorted(TOOLS.items())
    ]


def _page_entry(plugin: type[Plugin]) -> dict[str, Any]:
    return {
        **catalogue_entry(plugin),
        "params": describe(plugin.Params),
        "example_json": json.dumps(plugin.example, indent=2),
    }


def plugin_catalogue() -> dict[str, Any]:
    """The catalogue page's context."""
    targets = [_page_entry(cls) for _, cls in sorted(TARGETS.items())]
    scorers = [_page_entry(cls) for _, cls in sorted(SCORERS.items())]
    tools = [_page_entry(cls) for _, cls in sorted(TOOLS.items())]
    return {"sections": [("Targets", targets), ("Scorers", scorers), ("Tools", tools)]}
