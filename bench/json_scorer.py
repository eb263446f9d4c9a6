"""What the ``json`` scorer costs per item, for an ordinary schema.

    python bench/json_scorer.py [items]

Scores ``items`` (default 300) small outputs (a record of five fields, as a
model asked for structured output writes) against a schema of nine
properties, the way the executor does (``ScorerCall``): one at a time, then
all at once (``asyncio.gather``, as a run with a high concurrency). Then the
same with the schema's address written as a ``$defs`` entry and a ``$ref``
(which the scorer validates in a worker process, where a plain schema and a
short output validate in a scorer thread). Prints the best of three rounds,
in milliseconds per item, after one warm-up call (pools started, schema
compiled). Figures depend on the machine and its load.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")

import django

django.setup()

from runs.plugins.scoring import ScorerCall  # noqa: E402
from runs.scorers import build_scorer, clean_scorer_specs  # noqa: E402
from runs.targets import TargetInput  # noqa: E402

SCHEMA = {
    "type": "object",
    "required": ["name", "age", "email"],
    "properties": {
        "name": {"type": "string", "minLength": 1, "pattern": "^[A-Z]"},
        "age": {"type": "integer", "minimum": 0, "maximum": 150},
        "email": {"type": "string", "pattern": "^[^@ ]+@[^@ ]+$"},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 10},
        "address": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "zip": {"type": "string", "pattern": "^[0-9]{5}$"},
            },
            "additionalProperties": False,
        },
        "role": {"enum": ["admin", "editor", "viewer"]},
        "score": {"anyOf": [{"type": "number"}, {"type": "null"}]},
    },
    "additionalProperties": False,
}


def output(n: int) -> str:
    return json.dumps(
        {
            "name": f"Ada {n}",
            "age": n % 100,
            "email": f"ada{n}@example.org",
            "tags": ["x", "y", str(n)],
            "address": {"city": "Paris", "zip": f"{n % 100000:05d}"},
        }
    )


WITH_REF = {
    **SCHEMA,
    "$defs": {"address": SCHEMA["properties"]["address"]},
    "properties": {**SCHEMA["properties"], "address": {"$ref": "#/$defs/address"}},
}


async def measure(schema: dict[str, Any], items: int) -> tuple[float, float]:
    spec = clean_scorer_specs([{"kind": "json", "params": {"schema": schema}}])[0]
    scorer = build_scorer(spec)
    item = TargetInput(index=0, external_id="x", input="q", expected=None)
    outputs = [output(n) for n in range(items)]
    first: Any = await ScorerCall(scorer, outputs[0], item).run()
    assert first.passed, first.reason
    one = together = float("inf")
    for _ in range(3):
        began = time.perf_counter()
        for text in outputs:
            await ScorerCall(scorer, text, item).run()
        one = min(one, (time.perf_counter() - began) * 1000 / items)

        began = time.perf_counter()
        outcomes = await asyncio.gather(
            *(ScorerCall(scorer, text, item).run() for text in outputs)
        )
        together = min(together, (time.perf_counter() - began) * 1000 / items)
        assert all(outcome.passed for outcome in outcomes)
    return one, together


async def main(items: int) -> None:
    for label, schema in (("plain schema", SCHEMA), ("schema with a $ref", WITH_REF)):
        one, together = await measure(schema, items)
        print(f"{label}, {items} items: {one:.3f} ms per item one at a time, "
              f"{together:.3f} ms per item all at once")  # fmt: skip


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 300))
