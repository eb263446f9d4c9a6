"""The layers of the code, read from its imports: the packages of ``runs/`` and
the project (``evalsite/``) import each other in no circle, each imports only
its own layer or those below (README's Architecture table, which names every
unit), and a capability's view module is imported by no other capability. No
module is over 600 lines, and ``runs/`` holds at most 12 modules directly.

A unit is a package directly in ``runs/`` (``runs/results/``), a module
directly in ``runs/`` (``runs/access.py``), or ``evalsite/``, as README's
Architecture section lists them."""

from __future__ import annotations

import ast
import functools
import re
from collections import defaultdict
from collections.abc import Iterator
from graphlib import CycleError, TopologicalSorter
from itertools import pairwise
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ("runs", "evalsite")
MAX_MODULE_LINES = 600
MAX_MODULES_IN_RUNS = 12
# A row of README's Architecture table: | layer | `unit` | what it holds |
ARCHITECTURE_ROW = re.compile(r"^\| ([a-z -]+) \| `([a-z_/.]+)` \|", re.MULTILINE)


def source_files() -> list[Path]:
    return sorted(path for top in SOURCES for path in (ROOT / top).rglob("*.py"))


@functools.cache
def parsed() -> tuple[tuple[Path, ast.Module], ...]:
    """Every source file with its syntax tree, parsed once for all the tests."""
    return tuple((path, ast.parse(path.read_text())) for path in source_files())


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
    for path, tree in parsed():
        relative = path.relative_to(ROOT)
        here = unit_of(tuple(relative.with_suffix("").parts))
        for name in set(imported(tree)):
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
    for path, tree in parsed():
        relative = path.relative_to(ROOT)
        here = unit_of(tuple(relative.with_suffix("").parts))
        for name in set(imported(tree)):
            parts = tuple(name.split("."))
            if (
                parts[-1] != "views"
                or not (ROOT / Path(*parts)).with_suffix(".py").is_file()
            ):
                continue
            if unit_of(parts) != here:
                crossings.append(f"{relative} -> {name}")
    assert crossings == []


def all_units() -> set[str]:
    units = {"evalsite/"}
    for path in (ROOT / "runs").iterdir():
        if path.is_dir() and any(path.rglob("*.py")):
            units.add(f"runs/{path.name}/")
        elif path.suffix == ".py" and path.name != "__init__.py":
            units.add(f"runs/{path.name}")
    return units


def readme_layers() -> dict[str, int]:
    """unit -> its layer's place in README's Architecture table, 0 the top."""
    text = (ROOT / "README.md").read_text()
    section = text.split("\n## Architecture\n", 1)[1].split("\n## ", 1)[0]
    layers: list[str] = []
    placed: dict[str, int] = {}
    for layer, unit in ARCHITECTURE_ROW.findall(section):
        if not layers or layers[-1] != layer:
            assert layer not in layers, f"README: layer {layer!r} is split by another"
            layers.append(layer)
        assert unit not in placed, f"README: {unit} has two lines"
        placed[unit] = len(layers) - 1
    return placed


def test_the_readme_places_every_unit_in_a_layer() -> None:
    placed = set(readme_layers())
    units = all_units()
    assert sorted(units - placed) == [], "units the Architecture table leaves out"
    assert sorted(placed - units) == [], "the Architecture table names no such unit"


def test_every_import_runs_down_the_readmes_layers() -> None:
    layer = readme_layers()
    up = [
        f"{here} ({layer[here]}) imports {there} ({layer[there]}): "
        + ", ".join(sorted(files))
        for here, targets in imports_by_unit().items()
        for there, files in targets.items()
        if here in layer and there in layer and layer[there] < layer[here]
    ]
    assert up == []


def test_no_module_is_over_600_lines() -> None:
    long = []
    for path in source_files():
        lines = len(path.read_text().splitlines())
        if lines > MAX_MODULE_LINES and "migrations" not in path.parts:
            long.append(f"{path.relative_to(ROOT)}: {lines} lines")
    assert long == []


def test_runs_holds_at_most_12_modules_directly() -> None:
    modules = sorted(path.name for path in (ROOT / "runs").glob("*.py"))
    assert len(modules) <= MAX_MODULES_IN_RUNS, modules


def is_module(dotted: str) -> bool:
    path = ROOT.joinpath(*dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def dotted(node: ast.expr) -> list[str] | None:
    """``a.b.c`` as ["a", "b", "c"]; None for anything but names and
    attributes of names."""
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Attribute):
        inner = dotted(node.value)
        return None if inner is None else [*inner, node.attr]
    return None


def private_reads(tree: ast.AST) -> Iterator[str]:
    """Names with a leading underscore this file takes from another of this
    project's modules: ``from runs.a import _b``, or ``a._b`` where ``a`` is
    a module of the project by any name this file gives it (``import runs.a``,
    ``import runs.a as x``, ``from runs import a``, and their attributes:
    ``runs.a._b``, ``records.reads._b``)."""
    modules: dict[str, str] = {top: top for top in SOURCES}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            if node.module.split(".")[0] not in SOURCES:
                continue
            for alias in node.names:
                name = f"{node.module}.{alias.name}"
                if is_module(name):
                    modules[alias.asname or alias.name] = name
                elif is_private(alias.name):
                    yield name
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in SOURCES and alias.asname:
                    modules[alias.asname] = alias.name
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or not is_private(node.attr):
            continue
        parts = dotted(node.value)
        if parts is None or parts[0] not in modules:
            continue
        owner = ".".join([modules[parts[0]], *parts[1:]])
        if is_module(owner):
            yield f"{owner}.{node.attr}"


def test_no_module_takes_another_ones_private_names() -> None:
    taken = [
        f"{path.relative_to(ROOT)} -> {name}"
        for path, tree in parsed()
        for name in sorted(set(private_reads(tree)))
    ]
    assert taken == []
