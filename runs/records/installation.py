"""This installation's name in what other installations may share.

Ids (of runs, users, targets) are per database, and two installations may
share one Redis: the keys and channel-layer groups evalsite keeps there
carry the database's identity, so one installation never counts, holds or
hears another's (a run 5 of each, a user 1 of each).
"""

from __future__ import annotations

import functools
import hashlib

from django.db import connection

# A URL without a port reaches the server's default one: the same database
# as a URL that writes it.
_DEFAULT_PORTS = {"postgresql": 5432, "mysql": 3306}


def database_id() -> str:
    """A short, stable name of the database this process uses: its engine,
    host, port and name, hashed. In tests, the test database's. Every
    process of an installation must write its database alike (README,
    "Scaling out"); a port left out counts as the default one."""
    where = connection.settings_dict
    vendor = connection.vendor
    port = where.get("PORT") or _DEFAULT_PORTS.get(vendor, "")
    return _hashed(f"{vendor}:{where.get('HOST')}:{port}:{where.get('NAME')}")


@functools.lru_cache(maxsize=16)
def _hashed(place: str) -> str:
    return hashlib.sha256(place.encode()).hexdigest()[:12]
