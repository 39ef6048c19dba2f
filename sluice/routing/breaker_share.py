"""Circuit breakers shared by every process on one Redis (``[limits] redis_url``): when a
circuit opens in one worker or replica, every other one skips that (connection, model)
too, for the same time (docs/deploy.md#several-replicas).

An opening is told two ways: a key ``<prefix>breaker:<connection>\\x1f<model>`` that
expires when the circuit would close (a process that starts later reads the open ones
once), and a message on ``<prefix>breakers`` that every running process applies as it
comes. What travels is how long the circuit stays open, not until when: hosts' clocks
need not agree. Each process still probes on its own once the time is up; a success
closes only its own circuit. Redis down: each process keeps its own breakers, as
without ``redis_url``, and says so in the log once per outage.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable

import msgspec
from redis.asyncio import Redis
from redis.exceptions import RedisError

from sluice.core.stopping import stopped
from sluice.routing.breaker import Breaker, Circuit

_log = logging.getLogger("sluice.routing")
_SEPARATOR = "\x1f"


class _Opened(msgspec.Struct, array_like=True, frozen=True):
    connection: str
    model: str
    seconds: float
    origin: str
    """The process that opened it (it does not apply its own message again)."""


class BreakerShare:
    """Owns ``client``. ``start`` reads the circuits open now and listens for more."""

    def __init__(
        self, client: Redis, prefix: str, breaker: Breaker, clock: Callable[[], float]
    ) -> None:
        self._client = client
        self._channel = f"{prefix}breakers"
        self._keys = f"{prefix}breaker:"
        self._breaker = breaker
        self._clock = clock
        self._origin = f"{os.getpid()}:{id(self)}"
        self._tasks: set[asyncio.Task[None]] = set()
        self._listening: asyncio.Task[None] | None = None
        self._failing = False
        self._closing = False

    @classmethod
    def from_url(
        cls, url: str, prefix: str, breaker: Breaker, clock: Callable[[], float]
    ) -> BreakerShare:
        """Its own client: a subscription waits for messages without a read timeout."""
        client = Redis.from_url(url, socket_connect_timeout=1.0, health_check_interval=30)
        return cls(client, prefix, breaker, clock)

    def opened(self, key: Circuit, seconds: float) -> None:
        """The breaker's hook: a circuit of this process opened for ``seconds``."""
        task = asyncio.get_running_loop().create_task(self._tell(key, seconds))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def start(self) -> None:
        """Subscribed, and the circuits open now applied, before the first request (at
        most a couple of seconds: past that, or with Redis down, it goes on trying in the
        background)."""
        ready = asyncio.get_running_loop().create_future()
        self._listening = asyncio.get_running_loop().create_task(self._listen(ready))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(ready), 2.0)

    async def close(self) -> None:
        """A listener redis-py kept from its cancel (parked again on a read without a
        timeout) ends when its connection is closed: closing never waits forever."""
        self._closing = True
        tasks = [*self._tasks, *([self._listening] if self._listening else [])]
        await stopped(tasks, within=1.0)
        await self._client.aclose()
        await stopped(tasks, within=1.0)

    async def _tell(self, key: Circuit, seconds: float) -> None:
        payload = msgspec.json.encode(_Opened(key[0], key[1], seconds, self._origin))
        try:
            async with self._client.pipeline(transaction=False) as pipe:
                pipe.set(self._keys + _SEPARATOR.join(key), payload, px=max(1, int(seconds * 1000)))
                pipe.publish(self._channel, payload)
                await pipe.execute()
            self._failing = False
        except (RedisError, OSError) as exc:
            self._unshared(exc)

    async def _listen(self, ready: asyncio.Future[None]) -> None:
        """Apply every opening told, reconnecting after an outage (then reading again
        the circuits open meanwhile), until closed."""
        while not self._closing:
            try:
                async with self._client.pubsub() as pubsub:
                    await pubsub.subscribe(self._channel)
                    await self._read_open()
                    if not ready.done():
                        ready.set_result(None)
                    self._failing = False
                    async for message in pubsub.listen():
                        if message.get("type") == "message":
                            self._apply(message["data"], None)
            except (RedisError, OSError) as exc:
                if self._closing:
                    return
                self._unshared(exc)
                await asyncio.sleep(1.0)

    async def _read_open(self) -> None:
        async for name in self._client.scan_iter(match=self._keys + "*", count=500):
            async with self._client.pipeline(transaction=False) as pipe:
                pipe.get(name)
                pipe.pttl(name)
                payload, left = await pipe.execute()
            if payload is not None and left and left > 0:
                self._apply(payload, left / 1000)

    def _apply(self, payload: bytes, left: float | None) -> None:
        try:
            told = msgspec.json.decode(payload, type=_Opened)
        except msgspec.DecodeError:
            return  # not ours
        if told.origin == self._origin and left is None:
            return
        seconds = told.seconds if left is None else left
        self._breaker.open_for((told.connection, told.model), self._clock(), seconds)

    def _unshared(self, exc: BaseException) -> None:
        if not self._failing:
            _log.warning("circuit breakers are not shared while Redis fails: %s", exc)
        self._failing = True
