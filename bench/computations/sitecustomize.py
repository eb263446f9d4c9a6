"""Counts what the server computes, by cache key kind (bench/mixed_load.py).

On the server's ``PYTHONPATH`` when ``EVALSITE_BENCH_COMPUTATIONS`` names a
directory: every value the default cache stores is one computation of its
kind (``run-summary``, ``compare``, ``page`` ...: the part of its key before
the first colon, ``cache_keys.py``; a template fragment's name), as a miss
stores what it computed (a going value's latest, stored beside it, is not
counted again). The counts are written to ``<pid>.json`` there as
JSON every half second, so the script reads the server's before and after
its window, of old code as of new.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import Counter
from contextlib import suppress

_PATH = os.environ.get("EVALSITE_BENCH_COMPUTATIONS")

if _PATH:
    from django.core.cache.backends import locmem

    _counts: Counter[str] = Counter()
    _lock = threading.Lock()
    _set = locmem.LocMemCache.set

    def _counted_set(
        self: object, key: object, *args: object, **kwargs: object
    ) -> object:
        if str(key).endswith(":latest"):
            # A going value's lineage keeps its latest (cache_keys.lineage):
            # the same computation stored a second time, not another.
            return _set(self, key, *args, **kwargs)
        kind = str(key).split(":", 1)[0]
        if kind.startswith("template.cache."):  # a fragment: its name, no digest
            kind = kind.rsplit(".", 1)[0]
        with _lock:
            _counts[kind] += 1
        return _set(self, key, *args, **kwargs)

    def _write() -> None:
        while True:
            time.sleep(0.5)
            with _lock:
                text = json.dumps(dict(_counts))
            path = os.path.join(_PATH, f"{os.getpid()}.json")
            with suppress(OSError):
                with open(f"{path}.tmp", "w") as out:
                    out.write(text)
                os.replace(f"{path}.tmp", path)

    locmem.LocMemCache.set = _counted_set

    # Whole pages rendered, by template (``render:runs/results/run_list.html``):
    # patched before any module imports the function by name.
    from django.template import loader

    _render_to_string = loader.render_to_string

    def _counted_render(template_name: object, *args: object, **kwargs: object) -> str:
        with _lock:
            _counts[f"render:{template_name}"] += 1
        return _render_to_string(template_name, *args, **kwargs)  # type: ignore[arg-type]

    loader.render_to_string = _counted_render  # type: ignore[assignment]
    threading.Thread(target=_write, daemon=True, name="computations").start()
