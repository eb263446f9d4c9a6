"""The layers of the code, read from its imports: the packages of ``runs/`` and
the project (``evalsite/``) import each other in no circle, and a capability's
view module is imported by no other capability.

A unit is a package directly in ``runs/`` (``runs/results/``), a module
directly in ``runs/`` (``runs/access.py``), or ``evalsite/``, as README's
Architecture section lists them."""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Iterator
from graphlib import CycleError, TopologicalSorter
from itertools import pairwise
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ("runs", "evalsite")


def source_files() -> list[Path]:
    return sorted(path for top in SOURCES for path in (ROOT / top).rglob("*.py"))


def imported(tree: ast.AST) -> Iterator[str]:
    """Every module an import may name: ``from a.b import c`` gives ``a.b``
    and ``a.b.c`` (c may be a module)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            yield node.module
            yield from (f"{node.module}.{alias.name}" for alias in node.names)


def unit_of(parts: tuple[str, ...]) -> str | None:
    """The unit of a module named by its dotted parts (None: not this project's,
    or ``runs`` itself)."""
    if parts[0] == "evalsite":
        return "evalsite/"
    if parts[0] != "runs" or len(parts) < 2:
        return None
    if (ROOT / "runs" / parts[1]).is_dir():
        return f"runs/{parts[1]}/"
    if (ROOT / "runs" / f"{parts[1]}.py").is_file():
        return f"runs/{parts[1]}.py"
    return None


def imports_by_unit() -> dict[str, dict[str, set[str]]]:
    """unit -> the units it imports -> the files that do."""
    found: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for path in source_files():
        relative = path.relative_to(ROOT)
        here = unit_of(tuple(relative.with_suffix("").parts))
        for name in set(imported(ast.parse(path.read_text()))):
            there = unit_of(tuple(name.split(".")))
            if here and there and there != here:
                found[here][there].add(str(relative))
    return found


def test_the_units_import_each_other_in_no_circle() -> None:
    found = imports_by_unit()
    graph = {unit: set(targets) for unit, targets in found.items()}
    try:
        TopologicalSorter(graph).prepare()
    except CycleError as exc:
        circle = exc.args[1]  # each is imported by the next
        steps = [
            f"{b} -> {a}: " + ", ".join(sorted(found[b][a]))
            for a, b in pairwise(circle)
        ]
        raise AssertionError("imports in a circle:\n" + "\n".join(steps)) from None


def test_no_capability_imports_another_ones_views() -> None:
    crossings = []
    for path in source_files():
        relative = path.relative_to(ROOT)
        here = unit_of(tuple(relative.with_suffix("").parts))
        for name in set(imported(ast.parse(path.read_text()))):
            parts = tuple(name.split("."))
            if (
                parts[-1] != "views"
                or not (ROOT / Path(*parts)).with_suffix(".py").is_file()
            ):
                continue
            if unit_of(parts) != here:
                crossings.append(f"{relative} -> {name}")
    assert crossings == []
