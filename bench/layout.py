"""Project names a bench imports, wherever the measured checkout keeps them.

A bench that measures another checkout (``--source``, an export of an older
commit) runs this bench's code against that checkout's modules. Before the
capability packages, the services, the importers and the projects' services
sat directly in ``runs/``; ``imported`` tries each module in turn, so one
bench measures both layouts alike.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

# Where each name lives now, then where it lived before the capability packages.
PLACES: dict[str, tuple[str, ...]] = {
    "run_create": ("runs.results.services", "runs.services"),
    "project_create": ("runs.projects.services", "runs.services"),
    "dataset_import": ("runs.datasets.importers.store", "runs.importers.store"),
    "dataset_create_from_items": (
        "runs.datasets.importers",
        "runs.importers",
    ),
}


def present(module: str) -> bool:
    """Whether the measured checkout has ``module`` as a file of its own.

    Asked of the files, not of the import system: an editable install of the
    project finds a module the checkout lacks in the installed tree instead.
    """
    import runs

    path = Path(runs.__file__).resolve().parent.parent.joinpath(*module.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def imported(name: str) -> Any:
    """``name`` from the first of its modules the checkout has."""
    for module in PLACES[name]:
        if present(module):
            found = importlib.import_module(module)
            if hasattr(found, name):
                return getattr(found, name)
    raise ImportError(f"{name} is in none of {', '.join(PLACES[name])}")
