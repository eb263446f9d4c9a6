"""What a target plug-in is written against (a public module for plug-in authors).

The names live in the plug-in core (``runs.plugins.targets``, whose
``__all__`` lists them); this module hands them on, with the declaration
types, under the path plug-ins have always imported.
"""

from __future__ import annotations

from runs.plugins import targets
from runs.plugins.declaration import Plugin, SecretRef, TargetContext
from runs.plugins.targets import *  # noqa: F403

__all__ = ["Plugin", "SecretRef", "TargetContext"]
__all__ += targets.__all__
