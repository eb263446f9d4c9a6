"""When an API key was last used, recorded off the request's path.

A bearer request must never wait on the database's write lock (during a large
import SQLite holds it for seconds) just to note that a key was used. The time
is recorded at most once a minute per key, by one background thread, with a
conditional UPDATE that only moves ``last_used_at`` forward past the interval:
concurrent processes write it at most once per interval between them.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime, timedelta

from django.db import DatabaseError, close_old_connections, transaction
from django.db.models import Q
from django.utils import timezone

from runs.models import ApiKey

RECORD_INTERVAL = timedelta(minutes=1)

logger = logging.getLogger(__name__)

_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="api-key-usage")
_lock = threading.Lock()
# Keys with a write queued or running, so a burst of requests queues one write.
_pending: dict[int, Future[None]] = {}


def key_usage_note(key: ApiKey) -> None:
    """Record that ``key`` was used now, unless it was within the interval."""
    now = timezone.now()
    if key.last_used_at is not None and now - key.last_used_at < RECORD_INTERVAL:
        return
    # Outside a transaction this queues the write at once; inside one, the
    # row may not be visible to the writer's connection before it commits.
    transaction.on_commit(lambda: _queue(key.pk, now))


def _queue(key_pk: int, now: datetime) -> None:
    with _lock:
        if key_pk in _pending:
            return
        future = _executor.submit(_record, key_pk, now)
        _pending[key_pk] = future
    future.add_done_callback(lambda _: _forget(key_pk))


def key_usage_flush() -> None:
    """Wait for the writes queued so far (tests and shutdown)."""
    with _lock:
        futures = list(_pending.values())
    for future in futures:
        future.exception()


def _forget(key_pk: int) -> None:
    with _lock:
        _pending.pop(key_pk, None)


def _record(key_pk: int, now: datetime) -> None:
    close_old_connections()
    try:
        ApiKey.objects.filter(
            Q(last_used_at__isnull=True) | Q(last_used_at__lte=now - RECORD_INTERVAL),
            pk=key_pk,
        ).update(last_used_at=now)
    except DatabaseError as exc:
        # A missed note is harmless; it is retried on the key's next use.
        logger.warning("could not record the use of API key %s: %s", key_pk, exc)
    finally:
        close_old_connections()
