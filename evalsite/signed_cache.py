"""What evalsite keeps in a Redis cache: signed JSON, under keyed names.

Django's Redis cache pickles its values, and unpickling runs code: a process
that can write to the Redis server (anything that reaches it, when it has no
password) could plant a value that runs a command in the web server the next
time it is read. Here every value is JSON signed with the secret key (one
salt per purpose), and a value that is not ours, altered, or not JSON reads
as a cache miss: it is never decoded, let alone unpickled.

The names of the entries are keyed hashes of the cache's own keys, so that
listing the server's keys does not hand out what the keys hold (a session's
cache key holds the session's id, which signs its owner in).

Set in ``CACHES`` (settings.py) for every Redis cache:

    "BACKEND": "evalsite.signed_cache.PooledRedisCache",
    "KEY_FUNCTION": "evalsite.signed_cache.hashed_key",
    "OPTIONS": {"serializer": "evalsite.signed_cache.SessionCacheSerializer"},

Only JSON values can be stored (a session's data is JSON), and ``incr`` is
not supported: a signed number is not a Redis integer.
"""

from __future__ import annotations

import logging
import re
import threading
from typing import Any

from django.core import signing
from django.core.cache.backends.redis import RedisCache, RedisCacheClient
from django.utils.crypto import salted_hmac
from django.utils.functional import cached_property
from redis import Redis

logger = logging.getLogger("evalsite")


class SignedJSONSerializer:
    """JSON signed with the secret key; anything else loads as ``None``.

    ``None`` is how Django's cache-backed sessions (and any ``cache.get(key)``
    without a default) see a miss; refused values are also logged.
    """

    # Each cache signs with its own salt: a value signed for one purpose is
    # refused by every other.
    salt = "evalsite.signed_cache"

    def dumps(self, obj: Any) -> bytes:
        return signing.Signer(salt=self.salt).sign_object(obj).encode("ascii")

    def loads(self, data: bytes | str) -> Any:
        try:
            text = data.decode("ascii") if isinstance(data, bytes) else data
            return signing.Signer(salt=self.salt).unsign_object(text)
        except (signing.BadSignature, ValueError) as exc:
            # ValueError: not ASCII, not base64 or not JSON (the last two only
            # under a valid signature, i.e. never from another writer).
            logger.warning(
                "a cache value failed its check (%s: %s): read as a miss",
                type(exc).__name__,
                str(exc)[:100],
            )
            return None


class SessionCacheSerializer(SignedJSONSerializer):
    salt = "evalsite.signed_cache.sessions"


def hashed_key(key: str, key_prefix: str, version: int | str) -> str:
    """A cache's ``KEY_FUNCTION``: the key hashed with the secret key."""
    digest = salted_hmac(
        "evalsite.signed_cache.key", f"{version}:{key}", algorithm="sha256"
    ).hexdigest()
    return f"{key_prefix}:{version}:{digest}"


class OneClientPerPool(RedisCacheClient):
    """Django's Redis cache client, making one redis-py client per pool
    (one for reads, one for writes), not one per call: making one (its table
    of reply handlers) cost as much CPU as the call it made. A client over a
    pool is safe to share between threads.

    With several servers, reads stay on the one first picked.
    """

    def __init__(self, servers: list[str], **options: Any) -> None:
        super().__init__(servers, **options)
        self.clients: dict[bool, Redis] = {}

    def get_client(self, key: Any = None, *, write: bool = False) -> Redis:
        client = self.clients.get(write)
        if client is None:
            client = self.clients[write] = super().get_client(key, write=write)
        return client


# One client, holding one pool of connections, per Redis cache of this
# process (its servers and options).
_CLIENTS: dict[tuple[tuple[str, ...], str], RedisCacheClient] = {}
_CLIENTS_LOCK = threading.Lock()


class PooledRedisCache(RedisCache):
    """Django's Redis cache, with one pool of connections per process.

    Django keeps a cache object per request (``caches`` is local to each
    request's context), and each made a pool of its own: every request that
    read a session opened a new connection to Redis and said hello on it, a
    fifth of a distributed web server's CPU under load (bench/README.md). A
    pool is safe to share between threads.
    """

    def __init__(self, server: str | list[str], params: dict[str, Any]) -> None:
        super().__init__(server, params)
        # As Django's RedisCache reads them, kept here for the pool's key.
        self.servers = re.split("[;,]", server) if isinstance(server, str) else server
        self.options: dict[str, Any] = params.get("OPTIONS", {})

    @cached_property
    def _cache(self) -> RedisCacheClient:
        key = (tuple(self.servers), repr(sorted(self.options.items())))
        with _CLIENTS_LOCK:
            client = _CLIENTS.get(key)
            if client is None:
                client = OneClientPerPool(self.servers, **self.options)
                _CLIENTS[key] = client
        return client
