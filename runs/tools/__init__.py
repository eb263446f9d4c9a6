"""Tools an agent may call: one file per kind, registered by kind string.

Each built-in kind is known by name when this package is imported (by the
``agent`` target) and its module imported when the kind is first looked up
or every kind is read (``Registry.defer``): a process that never runs an
agent's tool imports none of them (the ``code`` tool's sandbox...).
``runs.plugins.tools`` holds the protocol and the registry.
"""

from __future__ import annotations

from runs.plugins.tools import TOOLS

# The built-in kinds, each registered by the module of its name.
TOOL_KINDS = ("code", "final_answer", "http", "python")
for kind in TOOL_KINDS:
    TOOLS.defer(kind, f"{__name__}.{kind}")
