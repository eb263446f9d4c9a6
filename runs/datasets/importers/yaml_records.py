"""YAML dataset files: parsed whole, so smaller than other files, and safely.

A YAML document is one value, composed and constructed whole: it takes
several times its size in memory and, even with libyaml's C parser, far
longer to read than JSON. YAML files may have at most
``EVALSITE_MAX_YAML_BYTES``; larger datasets belong in JSON Lines, which is
read a line at a time.

libyaml (when PyYAML has it) scans and parses; composing stays in Python, to
measure aliases while the document is composed: a file may not repeat more
than a bounded amount of data through them (a "billion laughs" file is
refused before anything is expanded), nor nest deeper than ``MAX_DEPTH``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, BinaryIO

import yaml
from django.conf import settings
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.resolver import Resolver

from runs.errors import InvalidInput

try:
    from yaml._yaml import CParser as _Parser
except ImportError:  # PyYAML built without libyaml
    # PyYAML's pure-Python parser, in the C parser's place.
    class _Parser(yaml.reader.Reader, yaml.scanner.Scanner, yaml.parser.Parser):  # type: ignore[no-redef]  # see above
        def __init__(self, stream: str) -> None:
            yaml.reader.Reader.__init__(self, stream)
            yaml.scanner.Scanner.__init__(self)
            yaml.parser.Parser.__init__(self)


# Nesting of a YAML value; PyYAML composes and constructs recursively.
MAX_DEPTH = 100
# What YAML aliases may repeat at least, whatever the file's size.
ALIAS_BYTES_FLOOR = 1024 * 1024
# How often (in values composed) the parse reports its progress.
CHECK_EVERY = 1000
BOM = b"\xef\xbb\xbf"
# libyaml's parser stops at 1,000 levels itself.
_LIBYAML_TOO_DEEP = "exceeded maximum nesting depth"
_LONG_NUMBER = f"a number has more than {sys.get_int_max_str_digits()} digits"


class _YamlLoader(Composer, _Parser, SafeConstructor, Resolver):
    """Safe YAML that keeps dates as written and bounds nesting and aliases."""

    def __init__(
        self, stream: str, *, alias_budget: int, on_line: Callable[[int], None]
    ) -> None:
        _Parser.__init__(self, stream)
        Composer.__init__(self)
        SafeConstructor.__init__(self)
        Resolver.__init__(self)
        self.depth = 0
        self.open_anchors: list[str | None] = []
        self.alias_budget = alias_budget
        self.repeated = 0
        self.measures: dict[int, tuple[int, int]] = {}
        self.on_line = on_line
        self.nodes = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        # The composer asks for a node only where the parser has one, placed.
        assert event is not None and event.start_mark is not None
        line = event.start_mark.line + 1
        self.nodes += 1
        if self.nodes % CHECK_EVERY == 0:
            self.on_line(line)
        if isinstance(event, yaml.AliasEvent):
            if event.anchor in self.open_anchors:
                raise InvalidInput(
                    f"the alias *{event.anchor} refers to a value that contains it",
                    line=line,
                )
            node = self.anchors.get(event.anchor)
            if node is not None and event.anchor is not None:
                self._count_alias(node, event.anchor, line)
            return super().compose_node(parent, index)
        if self.depth >= MAX_DEPTH:
            raise InvalidInput(f"values nest deeper than {MAX_DEPTH} levels", line=line)
        self.depth += 1
        self.open_anchors.append(getattr(event, "anchor", None))
        try:
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1
            self.open_anchors.pop()

    def _count_alias(self, node: yaml.Node, anchor: str, line: int) -> None:
        size, height = self._measure(node)
        if self.depth + height >= MAX_DEPTH:
            raise InvalidInput(
                f"values nest deeper than {MAX_DEPTH} levels through the alias "
                f"*{anchor}",
                line=line,
            )
        self.repeated += size
        if self.repeated > self.alias_budget:
            raise InvalidInput(
                f"aliases would repeat more than {self.alias_budget:,} bytes "
                f"(at *{anchor}); write the values out instead",
                line=line,
            )

    def _measure(self, node: yaml.Node) -> tuple[int, int]:
        """About how many bytes the node takes as JSON, and its nesting height."""
        known = self.measures.get(id(node))
        if known is not None:
            return known
        if isinstance(node, yaml.ScalarNode):
            result = (len(node.value) + 3, 0)
        else:
            children = (
                node.value
                if isinstance(node, yaml.SequenceNode)
                else [child for pair in node.value for child in pair]
            )
            measured = [self._measure(child) for child in children]
            result = (
                2 + sum(size for size, _ in measured),
                1 + max((height for _, height in measured), default=0),
            )
        self.measures[id(node)] = result
        return result

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        try:
            return super().construct_yaml_int(node)
        except ValueError:  # more digits than Python converts
            raise yaml.constructor.ConstructorError(
                None, None, _LONG_NUMBER, node.start_mark
            ) from None


_YamlLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if not tag.endswith(":timestamp")]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
# The stubs know PyYAML's own loaders only; this one is a SafeLoader's parts.
_YamlLoader.add_constructor("tag:yaml.org,2002:int", _YamlLoader.construct_yaml_int)  # type: ignore[type-var]  # see above


def yaml_document(
    stream: BinaryIO, *, on_line: Callable[[int], None] = lambda line: None
) -> tuple[Any, list[int] | None]:
    """The value of a YAML file and, if it is a list, the line of each item.

    ``on_line`` is called with the line reached every ``CHECK_EVERY`` values
    composed; it may raise to stop the parse.
    """
    text = _read_text(stream)
    loader = _YamlLoader(
        text, alias_budget=max(len(text), ALIAS_BYTES_FLOOR), on_line=on_line
    )
    try:
        node = loader.get_single_node()
        if node is None:
            raise InvalidInput("the file has no items")
        data = loader.construct_document(node)
        if not isinstance(data, list):
            return data, None
        return data, [child.start_mark.line + 1 for child in node.value]
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        if exc.problem == _LIBYAML_TOO_DEEP:  # before the composer counts
            raise InvalidInput(
                f"values nest deeper than {MAX_DEPTH} levels", line=line
            ) from None
        raise InvalidInput(f"invalid YAML: {exc.problem or exc}", line=line) from None
    except yaml.YAMLError as exc:
        raise InvalidInput(f"invalid YAML: {exc}") from None
    except RecursionError:
        raise InvalidInput("invalid YAML: nested too deeply") from None
    finally:
        loader.dispose()


def _read_text(stream: BinaryIO) -> str:
    limit = settings.EVALSITE_MAX_YAML_BYTES
    content = stream.read(limit + 1).removeprefix(BOM)
    if len(content) > limit:
        raise InvalidInput(
            f"the YAML file has more than {limit:,} bytes, the limit for YAML "
            "(EVALSITE_MAX_YAML_BYTES); save larger datasets as JSON Lines "
            "(one JSON object per line), which may be larger",
            field="file",
        )
    try:
        return content.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = content[: exc.start].count(b"\n") + 1
        raise InvalidInput(
            f"the file is not valid UTF-8 (byte 0x{content[exc.start]:02x})", line=line
        ) from None
