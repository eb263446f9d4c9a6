"""The Redis side of the limits shared across processes (shared_limits.py)
and of the tries a person may make (``targets/try_throttle.py``).

Lua scripts, each atomic in Redis and timed by its clock (``TIME``), so that
machines' clocks need not agree: the twin of ``limits_store.py``; and the
client both limits talk to Redis with.
"""

from __future__ import annotations

from typing import Any

REDIS_TIMEOUT = 0.5

RESERVE_LUA = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local interval = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then tat = now end
local wait = tat + interval - now - window
if wait > window then
  return {0, string.format('%.6f', wait - window)}
end
tat = tat + interval
local ttl = math.ceil((tat - now) * 1000) + 60000
redis.call('SET', KEYS[1], string.format('%.6f', tat), 'PX', ttl)
return {1, string.format('%.6f', wait)}
"""


BACKOFF_RAISE_LUA = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local level = tonumber(redis.call('HGET', KEYS[1], 'level') or '0')
local last = tonumber(redis.call('HGET', KEYS[1], 'last') or '0')
if now - last >= tonumber(ARGV[1]) then
  level = math.min(level + 1, tonumber(ARGV[3]))
  redis.call('HSET', KEYS[1], 'level', level, 'last', string.format('%.6f', now))
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return level
"""


# A run's leases (KEYS[1]: lease -> when it expires) and their holders
# (KEYS[2]: holder -> when it expires). ARGV: holder, size, ttl, the leases
# asked for; grants as many as are free, returns them and the live holders.
# The keys' own expiry only grows: a lease taken with a shorter lifetime never
# takes the others with it.
LEASE_TAKE_LUA = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local ttl = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
redis.call('ZADD', KEYS[2], now + ttl, ARGV[1])
local free = tonumber(ARGV[2]) - redis.call('ZCARD', KEYS[1])
local granted = 0
for i = 4, #ARGV do
  if granted >= free then break end
  redis.call('ZADD', KEYS[1], now + ttl, ARGV[i])
  granted = granted + 1
end
local holders = redis.call('ZCARD', KEYS[2])
local ms = math.ceil(ttl * 1000)
for _, key in ipairs(KEYS) do
  if redis.call('PTTL', key) < ms then redis.call('PEXPIRE', key, ms) end
end
return {granted, holders}
"""


# ARGV: holder, ttl, the leases to renew (those still held); returns the live
# holders, then the leases that had expired (free for others now: lost).
LEASE_RENEW_LUA = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local ttl = tonumber(ARGV[2])
local lost = {}
for i = 3, #ARGV do
  local expires = redis.call('ZSCORE', KEYS[1], ARGV[i])
  if expires and tonumber(expires) > now then
    redis.call('ZADD', KEYS[1], now + ttl, ARGV[i])
  else
    table.insert(lost, ARGV[i])
  end
end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
redis.call('ZADD', KEYS[2], now + ttl, ARGV[1])
local holders = redis.call('ZCARD', KEYS[2])
local ms = math.ceil(ttl * 1000)
for _, key in ipairs(KEYS) do
  if redis.call('PTTL', key) < ms then redis.call('PEXPIRE', key, ms) end
end
return {holders, unpack(lost)}
"""


# ARGV: holder, the leases it still holds.
LEASE_LEAVE_LUA = """
redis.call('ZREM', KEYS[2], ARGV[1])
for i = 2, #ARGV do
  redis.call('ZREM', KEYS[1], ARGV[i])
end
return 1
"""


def redis_client(url: str) -> Any:
    """An asyncio Redis client that gives up within REDIS_TIMEOUT: a store
    that does not answer is left for a process's own counts, never waited on."""
    from redis import asyncio as aioredis

    return aioredis.Redis.from_url(
        url,
        socket_timeout=REDIS_TIMEOUT,
        socket_connect_timeout=REDIS_TIMEOUT,
        retry_on_timeout=False,
    )
