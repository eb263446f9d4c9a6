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


def database_id() -> str:
    """A short, stable name of the database this process uses: its engine,
    host, port and name, hashed. In tests, the test database's."""
    where = connection.settings_dict
    return _hashed(
        f"{connection.vendor}:{where.get('HOST')}:{where.get('PORT')}:"
        f"{where.get('NAME')}"
    )


@functools.lru_cache(maxsize=16)
def _hashed(place: str) -> str:
    return hashlib.sha256(place.encode()).hexdigest()[:12]
