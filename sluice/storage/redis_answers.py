"""The Redis :class:`~sluice.storage.answers.KeptAnswers`: the response cache's answers
shared by every worker and replica on one Redis (``[limits] redis_url``), so an answer
one process kept is a hit on every other (docs/cache.md#the-store).

Each answer is a key ``<prefix>answer:<key>`` that expires with the answer (``PX``).
Beside them, one script keeps the bound: a sorted set ``<prefix>answers:used`` (each
answer by its last use, counted in ``<prefix>answers:turn``), one
``<prefix>answers:expires`` (by when it expires), a hash ``<prefix>answers:sizes`` and
the running total ``<prefix>answers:bytes``. A put first forgets the answers that
expired, then drops the least recently used until the new one fits ``max_bytes``, all
in one script (atomic: two processes never overrun the bound); a hit makes its answer
the most recent. Each reply carries the count and the bytes kept, which ``/metrics``
shows as last seen (no round trip when scraped).

A lookup waits at most :data:`TIMEOUT` seconds for a connection, as long to connect and
as long for its reply, :data:`LOOKUP_WAIT` in all; a Redis that fails or is slow makes
it a miss, and for :data:`PAUSE` seconds after, every
lookup is a miss at once (no request waits on a Redis known to be down). A put runs off
the response path (at most :data:`MOST_PENDING` at a time; more are dropped); one that
fails is dropped. Either is said in the log once per outage.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError

from sluice.core.stopping import stopped

_log = logging.getLogger("sluice.storage")
TIMEOUT = 0.5
"""Seconds a lookup (or a put) waits for a connection, to connect, and for a reply."""
PAUSE = 1.0
"""Seconds Redis is left alone after it failed or was slow."""
MOST_PENDING = 16
"""Puts on their way to Redis at most; one more is dropped."""
CONNECTIONS = 64
"""The pool's connections: puts take at most :data:`MOST_PENDING` of them, so a burst of
puts never keeps a lookup waiting for one."""
LOOKUP_WAIT = 3 * TIMEOUT
"""Seconds a lookup takes at most, whatever it waited on (a connection, the connect, a
retry, the reply)."""

_FORGET = """
local function forget(member)
  local size = redis.call('HGET', KEYS[3], member)
  if size then redis.call('DECRBY', KEYS[4], size) end
  redis.call('HDEL', KEYS[3], member)
  redis.call('ZREM', KEYS[1], member)
  redis.call('ZREM', KEYS[2], member)
  redis.call('DEL', ARGV[1] .. member)
end
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local turn = redis.call('INCR', KEYS[5])
"""
_STANDING = "redis.call('ZCARD', KEYS[1]), tonumber(redis.call('GET', KEYS[4]) or '0')"

_PUT = (
    _FORGET
    + """
local member, encoded, ttl, most = ARGV[2], ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5])
for _, gone in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, 1000)) do
  forget(gone)
end
forget(member)
local size, evicted = #encoded, 0
if size <= most then
  while tonumber(redis.call('GET', KEYS[4]) or '0') + size > most do
    local oldest = redis.call('ZRANGE', KEYS[1], 0, 0)
    if #oldest == 0 then break end
    forget(oldest[1])
    evicted = evicted + 1
  end
  redis.call('SET', ARGV[1] .. member, encoded, 'PX', ttl)
  redis.call('ZADD', KEYS[1], turn, member)
  redis.call('ZADD', KEYS[2], now + ttl, member)
  redis.call('HSET', KEYS[3], member, size)
  redis.call('INCRBY', KEYS[4], size)
end
return {"""
    + _STANDING
    + ", evicted}"
)
"""ARGV: the answers' key prefix, the key, the answer, its ttl (ms), ``max_bytes``.
Returns the answers kept, their bytes, and how many were dropped to make room."""

_GET = (
    _FORGET
    + """
local member = ARGV[2]
local encoded = redis.call('GET', ARGV[1] .. member)
if encoded then
  redis.call('ZADD', KEYS[1], 'XX', turn, member)
else
  forget(member)
end
return {encoded or false, """
    + _STANDING
    + "}"
)
"""ARGV: the answers' key prefix, the key. Returns the answer (nil when there is none),
the answers kept and their bytes."""


class RedisAnswers:
    """Owns ``client``. ``clock`` (seconds) times the pause after a failure."""

    def __init__(
        self, client: Redis, prefix: str, max_bytes: int, clock: Callable[[], float]
    ) -> None:
        self._client = client
        self._keys = [
            f"{prefix}answers:{name}" for name in ("used", "expires", "sizes", "bytes", "turn")
        ]
        self._values = f"{prefix}answer:"
        self.max_bytes = max_bytes
        self._clock = clock
        self._put = client.register_script(_PUT)
        self._get = client.register_script(_GET)
        self._pending: set[asyncio.Task[None]] = set()
        self._paused_until = float("-inf")
        self._failing = False
        self.entries = 0
        self.kept_bytes = 0
        self.evictions = 0

    @classmethod
    def from_url(
        cls, url: str, prefix: str, max_bytes: int, clock: Callable[[], float]
    ) -> RedisAnswers:
        # One immediate retry after a connection error (a pooled connection the server
        # closed), none after a timeout: a lookup is a miss sooner than it is late.
        pool = BlockingConnectionPool.from_url(
            url,
            max_connections=CONNECTIONS,
            timeout=TIMEOUT,
            socket_timeout=TIMEOUT,
            socket_connect_timeout=TIMEOUT,
            retry=Retry(NoBackoff(), 1, supported_errors=(RedisConnectionError,)),
        )
        return cls(Redis.from_pool(pool), prefix, max_bytes, clock)

    @property
    def kind(self) -> str:
        return "redis"

    @property
    def reachable(self) -> bool:
        return self._clock() >= self._paused_until

    async def get(self, key: str) -> bytes | None:
        """The answer under ``key``; None when there is none or Redis fails."""
        if self._clock() < self._paused_until:
            return None
        try:
            async with asyncio.timeout(LOOKUP_WAIT):
                got: Any = await self._get(keys=self._keys, args=[self._values, key])
        except (RedisError, OSError, TimeoutError) as exc:
            self._failed("answers are not looked up", exc)
            return None
        self._recovered()
        encoded, self.entries, self.kept_bytes = got
        return None if encoded is None else bytes(encoded)

    def put(self, key: str, encoded: bytes, ttl: float) -> None:
        """Kept off the response path; dropped when Redis fails or too many are pending."""
        if self._clock() < self._paused_until or len(self._pending) >= MOST_PENDING:
            return
        task = asyncio.get_running_loop().create_task(self._kept(key, encoded, ttl))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _kept(self, key: str, encoded: bytes, ttl: float) -> None:
        args: list[str | bytes | int] = [
            self._values,
            key,
            encoded,
            max(1, round(ttl * 1000)),
            self.max_bytes,
        ]
        try:
            got: Any = await self._put(keys=self._keys, args=args)
        except (RedisError, OSError) as exc:
            self._failed("answers are not kept", exc)
            return
        self._recovered()
        self.entries, self.kept_bytes, evicted = got
        self.evictions += evicted

    def _failed(self, what: str, exc: BaseException) -> None:
        self._paused_until = self._clock() + PAUSE
        if not self._failing:  # once per outage, not once per request
            self._failing = True
            _log.warning("response cache: %s while Redis fails (%s)", what, exc)

    def _recovered(self) -> None:
        if self._failing:
            self._failing = False
            _log.info("response cache: Redis answers again")

    async def start(self) -> None:
        """Read what the store holds, for ``/metrics`` before the first request."""
        try:
            async with self._client.pipeline(transaction=False) as pipe:
                pipe.zcard(self._keys[0])
                pipe.get(self._keys[3])
                count, total = await pipe.execute()
        except (RedisError, OSError) as exc:
            self._failed("the answers kept are not counted", exc)
            return
        self.entries, self.kept_bytes = int(count), int(total or 0)

    async def close(self) -> None:
        """The puts on their way finish (a second at most)."""
        if self._pending:
            await asyncio.wait(self._pending, timeout=1.0)
        await stopped(list(self._pending), within=1.0)
        await self._client.aclose()
