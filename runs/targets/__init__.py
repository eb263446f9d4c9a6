"""Targets: one file per kind, registered by kind string; and the target pages.

A target kind registers itself when this package is imported
(``RunsConfig.ready``). What the package hands on is the plug-in core's
``runs.plugins.targets``: the protocol, its input and output, ``build_target``.
"""

from __future__ import annotations

from runs.plugins import targets
from runs.plugins.targets import *  # noqa: F403
from runs.targets import (  # noqa: F401  (registration)
    agent,
    chain,
    demo,
    demo_agent,
    http,
    openai_chat,
    python,
    replay,
    scorer,
)

__all__ = targets.__all__
