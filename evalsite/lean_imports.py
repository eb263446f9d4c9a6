"""Parts of libraries that no process of the site uses, kept from loading.

Imported by the settings before anything that imports these libraries.
httpx's package imports its command-line client (``httpx._main``: click,
rich, pygments) when those are installed, about 60 ms of CPU at every start
of every process (``evalrun``'s start-up, bench/cli_startup.py); without it
httpx defines a stub ``httpx.main`` that says the client is unavailable. The
``httpx`` console script runs in its own interpreter and is not affected.
"""

from __future__ import annotations

import sys

# None in sys.modules makes the import fail with ImportError, which httpx
# catches. A process that has imported it already keeps it.
sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]
