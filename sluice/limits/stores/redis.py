"""Limits shared by every gateway process, in Redis.

One Lua script does a whole admission or settlement in one round trip, atomically:
read every bucket, check that all have room, charge all or none. It runs the same
arithmetic as :mod:`sluice.limits.bucket` (integers, exact in Lua's doubles below
2**53). Time is Redis's own ``TIME``: the one clock every replica shares, so skew
between gateway hosts cannot drain or refill a bucket early (``clock`` overrides it,
for tests). Each bucket is a hash ``{d: debt, t: ms}`` that expires once drained.
The script is loaded once; redis-py's ``Script`` sends EVALSHA and loads it again
after a NOSCRIPT (a restarted or flushed server).

Redis unreachable or too slow: :class:`LimiterUnavailableError` (503); requests are
refused, never let through unlimited.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from sluice.limits.base import LimiterUnavailableError
from sluice.limits.decision import (
    Decision,
    Line,
    Subject,
    Ticket,
    admission_lines,
    decide,
    settlement_lines,
)

DEFAULT_PREFIX: Final = "sluice:rl:"

SCRIPT: Final = """
-- KEYS: one bucket each. ARGV: mode ('admit' | 'adjust'), now in ms ('' = this server's
-- TIME), then limit, window_ms, amount per key. Returns {admitted (1|0), debt...}: the
-- debts after charging when admitted, as found when not (nothing is written then).
if redis.replicate_commands then redis.replicate_commands() end -- Redis < 7: TIME, then writes
local now = tonumber(ARGV[2])
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function arg(i, k) return tonumber(ARGV[3 * i + k]) end
local debts = {}
for i, key in ipairs(KEYS) do
  local state = redis.call('HMGET', key, 'd', 't')
  local debt = tonumber(state[1]) or 0
  local drain = math.max(0, now - (tonumber(state[2]) or now)) * arg(i, 0)
  debts[i] = math.max(0, debt - drain)
end
if ARGV[1] == 'admit' then
  for i = 1, #KEYS do
    if debts[i] > math.max(0, arg(i, 0) - arg(i, 2)) * arg(i, 1) then
      table.insert(debts, 1, 0)
      return debts
    end
  end
end
for i, key in ipairs(KEYS) do
  local debt = math.max(0, debts[i] + arg(i, 2) * arg(i, 1))
  debts[i] = debt
  if debt > 0 then
    redis.call('HSET', key, 'd', debt, 't', now)
    redis.call('PEXPIRE', key, math.ceil(debt / arg(i, 0)) + 1)
  else
    redis.call('DEL', key)
  end
end
table.insert(debts, 1, 1)
return debts
"""


def connect(url: str, *, timeout: float = 1.0, max_connections: int = 64) -> Redis:
    """A client that fails fast rather than holding requests: ``timeout`` seconds to get
    a pooled connection, connect or answer. One immediate retry after a connection error
    (a pooled connection the server closed), none after a timeout: the script may have
    run. Past ``max_connections`` busy, admissions queue for a connection."""
    pool = BlockingConnectionPool.from_url(
        url,
        max_connections=max_connections,
        timeout=timeout,
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
        retry=Retry(NoBackoff(), 1, supported_errors=(RedisConnectionError,)),
    )
    return Redis.from_pool(pool)  # the client owns the pool: aclose() closes it


class RedisLimiter:
    """Owns ``client`` (``close`` closes it)."""

    def __init__(
        self,
        client: Redis,
        *,
        prefix: str = DEFAULT_PREFIX,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self._client = client
        self._prefix = prefix
        self._clock = clock
        self._script = client.register_script(SCRIPT)

    @classmethod
    def from_url(cls, url: str, *, prefix: str = DEFAULT_PREFIX) -> RedisLimiter:
        return cls(connect(url), prefix=prefix)

    async def admit(self, subject: Subject, estimated_tokens: int) -> Decision:
        lines = admission_lines(subject, estimated_tokens)
        ticket = Ticket(subject, estimated_tokens)
        if not lines:
            return Decision(True, ticket=ticket)
        admitted, debts = await self._run("admit", lines)
        return decide(ticket, lines, debts, admitted)

    async def finish(self, ticket: Ticket, total_tokens: int) -> None:
        lines = settlement_lines(ticket, total_tokens)
        if lines:
            await self._run("adjust", lines)

    async def check(self) -> None:
        try:
            await self._client.ping()
        except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
            raise LimiterUnavailableError("Redis does not answer") from exc

    async def close(self) -> None:
        await self._client.aclose()

    async def _run(self, mode: str, lines: list[Line]) -> tuple[bool, list[int]]:
        now = "" if self._clock is None else str(round(self._clock() * 1000))
        args: list[str | int] = [mode, now]
        for line in lines:
            args += [line.bucket.limit, line.bucket.window_ms, line.amount]
        keys = [self._prefix + line.ident for line in lines]
        try:
            result = await self._script(keys=keys, args=args)
        except (RedisConnectionError, RedisTimeoutError) as exc:
            raise LimiterUnavailableError("rate limits are temporarily unavailable") from exc
        admitted, *debts = (int(value) for value in result)
        return admitted == 1, debts
