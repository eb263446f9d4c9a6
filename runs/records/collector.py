"""The cyclic garbage collector held off while a large read becomes arrays.

A read of a run's rows makes a tuple a row and a tuple a column, which hold
no cycles and live until they are copied into arrays; the collector's passes
over them every 700 tuples made find nothing to free (a tenth of a run's
end, bench/README.md). ``evalsite/collector.py`` holds it off while a
command's apps load.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """The collector held off while a block makes many objects that hold no
    cycles and outlive it (rows read into arrays), then let run again if it
    ran before. Process-wide: other threads' cyclic garbage waits meanwhile
    (a run's end scans about 0.5 s of rows per 100,000 results)."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
