"""A ``fastest`` model's estimates shared by every process on one Redis (``[limits]
redis_url``): each process averages in what the others measured, so a replica that has
not yet sent a request to a connection still knows how fast it is, and one slow
connection seen by one replica moves every replica's order (docs/api.md#the-fastest-
connection-first).

Every :data:`EVERY` seconds, off the response path, a process writes its own averages
to ``<prefix>speeds:<origin>`` (expiring after :data:`KEPT`, so a process that died
drops out) and lists itself in ``<prefix>speeds``; then it reads every other listed
process's averages and hands them to :meth:`Speeds.share`. Redis down: each process
orders by its own averages alone, as without ``redis_url``, and says so in the log
once per outage.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import secrets
from collections.abc import Iterable

import msgspec
from redis.asyncio import Redis
from redis.exceptions import RedisError

from sluice.core.stopping import stopped
from sluice.routing.breaker import Circuit
from sluice.routing.speeds import Estimate, Speeds

EVERY = 1.0
"""Seconds between two exchanges with Redis."""
KEPT = 10.0
"""Seconds a process's averages outlive its last write."""

_log = logging.getLogger("sluice.routing")


class _Measured(msgspec.Struct, array_like=True, frozen=True):
    connection: str
    model: str
    estimate: Estimate


class _Told(msgspec.Struct, array_like=True, frozen=True):
    """One process's averages: by circuit, and each model's answer length."""

    circuits: list[_Measured]
    lengths: dict[str, float]


_ENCODER = msgspec.msgpack.Encoder()
_DECODER = msgspec.msgpack.Decoder(_Told)


class SpeedShare:
    """Owns ``client``; ``start`` begins the exchanges, ``close`` ends them."""

    def __init__(self, client: Redis, prefix: str, speeds: Speeds) -> None:
        self._client = client
        self._members = f"{prefix}speeds"
        self._keys = f"{prefix}speeds:"
        self._speeds = speeds
        self._origin = secrets.token_hex(8)  # PIDs repeat across containers
        self._task: asyncio.Task[None] | None = None
        self._failing = False
        self._closing = False

    @classmethod
    def from_url(cls, url: str, prefix: str, speeds: Speeds) -> SpeedShare:
        client = Redis.from_url(url, socket_connect_timeout=1.0, socket_timeout=2.0)
        return cls(client, prefix, speeds)

    async def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def close(self) -> None:
        """The exchanges end: told to stop, and cancelled until they do (a cancel can be
        lost, :func:`~sluice.core.stopping.stopped`)."""
        self._closing = True
        if self._task is not None:
            await stopped([self._task], within=2.0)
        with contextlib.suppress(RedisError, OSError):
            await self._client.delete(self._keys + self._origin)
        await self._client.aclose()

    async def _run(self) -> None:
        while not self._closing:
            try:
                await self.exchange()
                self._failing = False
            except (RedisError, OSError) as exc:
                self._speeds.share({})
                if not self._failing:
                    _log.warning("fastest estimates are not shared while Redis fails: %s", exc)
                self._failing = True
            await asyncio.sleep(EVERY)

    async def exchange(self) -> None:
        """This process's averages written, the others' read and applied (once)."""
        circuits, lengths = self._speeds.own()
        own = _Told([_Measured(c[0], c[1], e) for c, e in circuits.items()], lengths)
        async with self._client.pipeline(transaction=False) as pipe:
            pipe.set(self._keys + self._origin, _ENCODER.encode(own), px=int(KEPT * 1000))
            pipe.sadd(self._members, self._origin)
            pipe.expire(self._members, int(KEPT * 6))  # gone with the last process
            pipe.smembers(self._members)
            *_, members = await pipe.execute()
        listed = (m.decode("utf-8", "replace") for m in members)
        others = sorted(m for m in listed if m != self._origin)
        if not others:
            self._speeds.share({})
            return
        values = await self._client.mget([self._keys + o for o in others])
        gone = [o for o, v in zip(others, values, strict=True) if v is None]
        if gone:
            await self._client.srem(self._members, *gone)
        self._speeds.share(*_gathered(v for v in values if isinstance(v, bytes)))


def _gathered(
    payloads: Iterable[bytes],
) -> tuple[dict[Circuit, tuple[Estimate, ...]], dict[str, tuple[float, ...]]]:
    """Every other process's averages, by circuit and by model; a payload that is not
    ours, or an average that is not a positive finite number, is skipped."""
    found: dict[Circuit, list[Estimate]] = {}
    lengths: dict[str, list[float]] = {}
    for payload in payloads:
        try:
            told = _DECODER.decode(payload)
        except msgspec.DecodeError:
            continue
        for one in told.circuits:
            if all(_sound(v) for v in msgspec.structs.astuple(one.estimate)):
                found.setdefault((one.connection, one.model), []).append(one.estimate)
        for model, length in told.lengths.items():
            if _sound(length):
                lengths.setdefault(model, []).append(length)
    return (
        {circuit: tuple(estimates) for circuit, estimates in found.items()},
        {model: tuple(each) for model, each in lengths.items()},
    )


def _sound(value: float | None) -> bool:
    return value is None or (math.isfinite(value) and value >= 0)
