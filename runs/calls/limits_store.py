"""The database side of the limits shared across processes (shared_limits.py).

Plain sync functions, each one statement (so one transaction; a call told to
ask again later reads when in a second statement; a lease is taken in one
transaction under the run's advisory lock), called through
``database_sync_to_async``. The rate and back-off functions are for
PostgreSQL (its clock and ``INSERT ... ON CONFLICT`` make them atomic across
machines); the retry budget works on any database.
"""

from __future__ import annotations

from django.db import connection, transaction
from django.db.backends.utils import CursorWrapper
from django.db.models import F

from runs.models import RateBucket, Run

TABLE = RateBucket._meta.db_table
# The database's clock, in seconds: every machine reads the same one.
NOW = "EXTRACT(EPOCH FROM clock_timestamp())::float8"
MAX_LEVEL = 16  # halvings beyond this change nothing (the limit is 1 by then)

# The bucket's maths (``limits.reservation``) in one statement: the place is
# taken only when it is near enough (else no row comes back).
RESERVE = f"""
INSERT INTO {TABLE} AS b (key, tat, level, last, until)
VALUES (%(key)s, {NOW} + %(interval)s, 0, 0, 0)
ON CONFLICT (key) DO UPDATE SET tat = GREATEST(b.tat, {NOW}) + %(interval)s
WHERE GREATEST(b.tat, {NOW}) + %(interval)s - {NOW} - %(window)s <= %(window)s
RETURNING tat - {NOW} - %(window)s
"""
AHEAD = f"SELECT tat - {NOW} FROM {TABLE} WHERE key = %s"

BACKOFF_RAISE = f"""
INSERT INTO {TABLE} AS b (key, tat, level, last, until)
VALUES (%(key)s, 0, 1, {NOW}, {NOW} + %(hold)s)
ON CONFLICT (key) DO UPDATE
SET level = CASE
        WHEN b.until <= EXCLUDED.last THEN 1
        WHEN EXCLUDED.last - b.last >= %(cooldown)s
            THEN LEAST(b.level + 1, {MAX_LEVEL})
        ELSE b.level
    END,
    last = CASE
        WHEN b.until <= EXCLUDED.last OR EXCLUDED.last - b.last >= %(cooldown)s
            THEN EXCLUDED.last
        ELSE b.last
    END,
    until = EXCLUDED.until
RETURNING level
"""

BACKOFF_LEVEL = f"""
SELECT CASE WHEN until > {NOW} THEN level ELSE 0 END FROM {TABLE} WHERE key = %s
"""


def bucket_reserve(key: str, interval: float, window: float) -> tuple[bool, float]:
    """Take a call's place in the target's bucket if it is near enough;
    returns whether it was taken and how long to wait (``reservation``)."""
    with connection.cursor() as cursor:
        cursor.execute(RESERVE, {"key": key, "interval": interval, "window": window})
        row = cursor.fetchone()
        if row is not None:
            return True, float(row[0])
        cursor.execute(AHEAD, [key])  # the queue is full: when to ask again
        ahead = float(cursor.fetchone()[0])
    return False, max(ahead + interval - 2 * window, 0.0)


def backoff_raise(key: str, *, cooldown: float, hold: float) -> int:
    """Announce a burst of 429s: one more halving, unless one was announced
    less than ``cooldown`` seconds ago; in force for ``hold`` seconds after the
    last burst. Returns the level in force."""
    with connection.cursor() as cursor:
        cursor.execute(BACKOFF_RAISE, {"key": key, "cooldown": cooldown, "hold": hold})
        return int(cursor.fetchone()[0])


def backoff_level(key: str) -> int:
    """The halvings in force for ``key`` (0 once they have expired)."""
    with connection.cursor() as cursor:
        cursor.execute(BACKOFF_LEVEL, [key])
        row = cursor.fetchone()
    return int(row[0]) if row else 0


def retry_take(run_id: int, budget: int) -> bool:
    """Spend one retry of the run's budget, if any is left (every executor's)."""
    return bool(
        Run.objects.filter(pk=run_id, retries_used__lt=budget).update(
            retries_used=F("retries_used") + 1
        )
    )


def retries_used(run_id: int) -> int:
    return Run.objects.filter(pk=run_id).values_list("retries_used", flat=True)[0]


# A run's leases (``run_leases.RunLeases``) are rows of the same table, keyed
# ``lease:<run key>:<lease>``, and so are their holders (``holder:<run
# key>:<holder>``); ``until`` is when each expires.
LEASE_LOCK = "SELECT pg_advisory_xact_lock(hashtext(%s))"
EXPIRE = f"DELETE FROM {TABLE} WHERE key LIKE %s AND until <= {NOW}"
COUNT = f"SELECT count(*) FROM {TABLE} WHERE key LIKE %s"
LEASE_ADD = f"""
INSERT INTO {TABLE} (key, tat, level, last, until)
SELECT lease, 0, 0, 0, {NOW} + %s FROM unnest(%s::text[]) AS lease
"""
HOLDER_KEEP = f"""
INSERT INTO {TABLE} AS b (key, tat, level, last, until)
VALUES (%s, 0, 0, 0, {NOW} + %s)
ON CONFLICT (key) DO UPDATE SET until = EXCLUDED.until
"""
LEASE_RENEW = f"""
UPDATE {TABLE} SET until = {NOW} + %s WHERE key = ANY(%s) AND until > {NOW}
RETURNING key
"""
LEASE_DROP = f"DELETE FROM {TABLE} WHERE key = ANY(%s)"


def lease_prefix(key: str) -> str:
    return f"lease:{key}:"


def holder_prefix(key: str) -> str:
    return f"holder:{key}:"


def _holders(cursor: CursorWrapper, key: str, holder: str, ttl: float) -> int:
    """Keep ``holder`` among the live holders of ``key``; returns their number."""
    prefix = holder_prefix(key)
    cursor.execute(EXPIRE, [prefix + "%"])
    cursor.execute(HOLDER_KEEP, [prefix + holder, ttl])
    cursor.execute(COUNT, [prefix + "%"])
    return int(cursor.fetchone()[0])


def lease_take(
    key: str, holder: str, leases: list[str], size: int, ttl: float
) -> tuple[int, int]:
    """Take as many of ``leases`` as ``size`` places of ``key`` leave free
    (expired leases are free), for ``ttl`` seconds; returns how many, and the
    live holders."""
    prefix = lease_prefix(key)
    with transaction.atomic(), connection.cursor() as cursor:
        # Counting and adding must not interleave with another taker's.
        cursor.execute(LEASE_LOCK, [key])
        cursor.execute(EXPIRE, [prefix + "%"])
        cursor.execute(COUNT, [prefix + "%"])
        granted = max(0, min(len(leases), size - int(cursor.fetchone()[0])))
        if granted:
            cursor.execute(LEASE_ADD, [ttl, [prefix + x for x in leases[:granted]]])
        holders = _holders(cursor, key, holder, ttl)
    return granted, holders


def lease_renew(
    key: str, holder: str, leases: list[str], ttl: float
) -> tuple[int, list[str]]:
    """Renew ``leases`` and keep ``holder``; returns the live holders and the
    leases that had expired (lost: free for others)."""
    prefix = lease_prefix(key)
    renewed: set[str] = set()
    with transaction.atomic(), connection.cursor() as cursor:
        if leases:
            cursor.execute(LEASE_RENEW, [ttl, [prefix + lease for lease in leases]])
            renewed = {row[0].removeprefix(prefix) for row in cursor.fetchall()}
        holders = _holders(cursor, key, holder, ttl)
    return holders, [lease for lease in leases if lease not in renewed]


def lease_drop(key: str, leases: list[str]) -> None:
    with connection.cursor() as cursor:
        cursor.execute(LEASE_DROP, [[lease_prefix(key) + lease for lease in leases]])


def lease_leave(key: str, holder: str, leases: list[str]) -> None:
    keys = [holder_prefix(key) + holder, *(lease_prefix(key) + x for x in leases)]
    with connection.cursor() as cursor:
        cursor.execute(LEASE_DROP, [keys])
