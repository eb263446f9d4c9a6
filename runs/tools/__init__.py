"""Tools an agent may call: one file per kind, registered by kind string.

A tool kind registers itself when this package is imported (by the ``agent``
target); ``runs.plugins.tools`` holds the protocol and the registry.
"""

from __future__ import annotations

from runs.tools import code, final_answer, http, python

# The built-in kinds (imported above: each registers itself).
TOOL_KINDS = (code, final_answer, http, python)
