"""What a scorer plug-in is written against (a public module for plug-in authors).

The names live in the plug-in core (``runs.plugins.scorers``, whose
``__all__`` lists them); this module hands them on, with what a scorer reads
of an item and of its run, under the path plug-ins have always imported.
"""

from __future__ import annotations

from runs.plugins import scorers
from runs.plugins.declaration import SecretRef, TargetContext
from runs.plugins.scorers import *  # noqa: F403
from runs.plugins.targets import TargetInput

__all__ = ["SecretRef", "TargetContext", "TargetInput"]
__all__ += scorers.__all__
