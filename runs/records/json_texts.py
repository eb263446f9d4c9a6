"""JSON texts made by the C encoder that ``json.dumps`` ends in, made once."""

from __future__ import annotations

import json
from collections.abc import Callable
from json.encoder import (  # type: ignore[attr-defined]  # the stub leaves it out
    c_make_encoder,
    encode_basestring,
    encode_basestring_ascii,
)
from typing import Any

__all__ = ["JsonText"]

# What the C encoder raises for a value it cannot encode; the encoder's own
# ``encode`` then raises what it always raised.
NOT_ENCODED = (TypeError, ValueError, RecursionError)


class JsonText:
    """``json.JSONEncoder(**options).encode``, the same text, for less: that
    ``encode`` makes a C encoder for every call (and goes through three
    Python calls to it); this one is made once. It is made without the check
    for circular references, the only state an encoder keeps across calls
    (after an error it keeps stale entries, so a shared one would be unsafe):
    a value it cannot encode (a cycle, a NaN where none is allowed, a type
    JSON has not) is handed to ``encode``, which raises as it always did.
    Every result of a run is stored with two, and every request sends one."""

    __slots__ = ("encoder", "fast")

    def __init__(self, **options: Any) -> None:
        self.encoder = json.JSONEncoder(**options)
        self.fast: Callable[[Any, int], tuple[str, ...]] | None = None
        e = self.encoder
        if c_make_encoder is not None and e.indent is None:
            self.fast = c_make_encoder(
                None,  # no markers: see above
                e.default,
                encode_basestring_ascii if e.ensure_ascii else encode_basestring,
                None,
                e.key_separator,
                e.item_separator,
                e.sort_keys,
                e.skipkeys,
                e.allow_nan,
            )

    def __call__(self, value: Any) -> str:
        if self.fast is not None:
            try:
                return "".join(self.fast(value, 0))
            except NOT_ENCODED:
                pass  # encode raises it again, with the message it always had
        return self.encoder.encode(value)
