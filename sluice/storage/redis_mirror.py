"""The Redis :class:`~sluice.storage.mirror.StreamMirror`: resumable streams shared by
every process on one Redis (``[limits] redis_url``), so a reconnect, a ``DELETE``, or a
background response's poll, stream or cancel that reaches another worker or replica
than the one running it is served there (docs/api.md#several-replicas).

Nothing is written for a stream nobody asks for elsewhere: the process that does not
hold a stream publishes a *want* on ``<prefix>relay-ask``, and the process running it
(its owner) starts mirroring it then, from its first event, into a Redis stream
``<prefix>relay:<id>``: one entry per batch of events (entry ``0-n`` ends with event
``n``), at most one batch every :data:`BATCH_GAP` seconds, off the response path; a
last entry holding ``end`` says how the stream ended. Beside it a key
``<prefix>relaymeta:<id>`` (its account, headers, keep-alive; written with the first
batch) and a key ``<prefix>relayowner:<id>`` the owner refreshes while the stream
runs. A stream that outgrows ``resume_max_bytes`` ends its mirror too
(``overflowed``). Every key expires ``resume_retention`` seconds after the last write.

The asker reads it there: the events after the one asked for, then blocking reads for
the tail, until ``end``. If the owner's key expires with no ``end`` (the owner died,
:data:`OWNER_TTL` seconds after its last refresh), the reader's response ends cut, as
the stream did. A stop asked elsewhere is published on the same channel; the owner
stops the stream as if asked itself, and the asker answers once the mirror's ``end``
says so (503 when it does not in :data:`STOP_WAIT` seconds).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import AsyncGenerator
from typing import Any, NamedTuple

import msgspec
from redis.asyncio import Redis
from redis.exceptions import RedisError

from sluice.core.stopping import stopped
from sluice.errors import ServiceUnavailableError
from sluice.storage.mirror import Mirrored, MirrorSource, Owner

_log = logging.getLogger("sluice.storage")
BATCH_GAP = 0.02
"""Seconds between two writes of one stream's mirror (its events batch meanwhile)."""
OWNER_TTL = 5.0
"""Seconds the owner's key outlives its last refresh (refreshed every second)."""
WANT_WAIT = 1.0
"""Seconds an asker waits for the owner to start a stream's mirror."""
STOP_WAIT = 2.0
"""Seconds an asker waits for the owner to end a stream it asked to stop."""
_BLOCK_MS = 1000
_EVENTS = b"e"
_END = b"end"
_SEPARATOR = b"\n\n"
_REQUEST_ID = re.compile(r"req_[0-9A-Za-z_]{1,64}")
"""What a request id may look like: nothing else reaches Redis's key names."""


def _entries(raw: Any) -> list[tuple[int, dict[bytes, bytes]]]:
    """A stream's entries as Redis gave them: each one's number (``0-n``) and fields."""
    return [(int(bytes(entry_id).split(b"-")[1]), dict(fields)) for entry_id, fields in raw]


class _Meta(msgspec.Struct, array_like=True, frozen=True):
    """What a reader elsewhere needs besides the events: whose it is, how it began."""

    account_id: str
    headers: list[tuple[str, str]]
    keepalive: bytes
    opening: bytes


class _Asked(msgspec.Struct, array_like=True, frozen=True):
    """A process asks the stream's owner to ``stop`` it or to mirror it (``want``)."""

    kind: str
    request_id: str
    account_id: str


class _Names(NamedTuple):
    """One stream's keys."""

    stream: str
    meta: str
    owner: str


class RedisMirror:
    """Owns ``client`` (commands) and ``listener`` (the subscription, which waits for
    messages without a read timeout). ``start`` hears what other processes ask of this
    one's streams; ``find``, ``tail``, ``stop`` ask them of another's."""

    def __init__(self, client: Redis, listener: Redis, prefix: str) -> None:
        self._client = client
        self._listener = listener
        self._prefix = prefix
        self._channel = f"{prefix}relay-ask"
        self._tasks: set[asyncio.Task[bool]] = set()
        self._listening: asyncio.Task[None] | None = None
        self._failing = False
        self._closing = False

    @classmethod
    def from_url(cls, url: str, prefix: str) -> RedisMirror:
        # A command's read timeout above the blocking read's second, so a Redis that
        # stops answering is a 503, not a hung request.
        client = Redis.from_url(url, socket_connect_timeout=1.0, socket_timeout=3.0)
        listener = Redis.from_url(url, socket_connect_timeout=1.0, health_check_interval=30)
        return cls(client, listener, prefix)

    def _names(self, request_id: str) -> _Names:
        p = self._prefix
        return _Names(
            f"{p}relay:{request_id}", f"{p}relaymeta:{request_id}", f"{p}relayowner:{request_id}"
        )

    # --- the owner ------------------------------------------------------------------

    def mirror(self, relay: MirrorSource, retention: float) -> asyncio.Task[bool]:
        """Mirror ``relay`` until it ends (a task of its own, off the response path);
        the task's result says whether the mirror holds its end (False: Redis failed)."""
        task = asyncio.get_running_loop().create_task(self._mirror(relay, retention))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _mirror(self, relay: MirrorSource, retention: float) -> bool:
        names = self._names(relay.request_id)
        keep = max(1, int(retention))
        about = _Meta(relay.account_id, list(relay.headers), relay.keepalive, relay.opening)
        described: bytes | None = msgspec.msgpack.encode(about)
        try:
            sent = 0
            while True:
                changed = relay.signal()  # taken before reading: no event slips between
                sent = await self._write(relay, names, keep, sent, described)
                described = None
                self._failing = False
                if sent < 0:
                    return True
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(changed.wait(), 1.0)
                await asyncio.sleep(BATCH_GAP)
        except (RedisError, OSError) as exc:
            if not self._failing:  # once per outage, not once per stream
                self._failing = True
                _log.warning("streams are not shared (Redis: %s), from %s", exc, relay.request_id)
            return False

    async def _write(
        self, relay: MirrorSource, names: _Names, keep: int, sent: int, described: bytes | None
    ) -> int:
        """The events after the ``sent`` first, and the end if it came, in one pipeline
        (the first also clears what an earlier, failed mirror left and writes the
        description); how many are mirrored now (-1 once the end is)."""
        events = [] if relay.overflowed else relay.after(sent)
        ending: str | None = "overflowed" if relay.overflowed else relay.ended
        async with self._client.pipeline(transaction=False) as pipe:
            if described is not None:
                pipe.delete(names.stream)
                pipe.set(names.meta, described, ex=keep)
            if events:
                sent += len(events)
                pipe.xadd(names.stream, {_EVENTS: b"".join(events)}, id=f"0-{sent}")
            if ending is not None:
                pipe.xadd(names.stream, {_END: ending.encode()}, id=f"0-{sent + 1}")
                pipe.delete(names.owner)
            else:
                pipe.set(names.owner, b"1", px=int(OWNER_TTL * 1000))
            pipe.expire(names.stream, keep)
            pipe.expire(names.meta, keep)
            await pipe.execute()
        return -1 if ending is not None else sent

    async def listen(self, owner: Owner) -> None:
        """Tell ``owner`` every stop and want asked elsewhere, reconnecting after an
        outage (said in the log once per outage), until closed; a message that is not
        ours is skipped."""
        deaf = False
        while not self._closing:
            try:
                async with self._listener.pubsub() as pubsub:
                    await pubsub.subscribe(self._channel)
                    deaf = False
                    async for message in pubsub.listen():
                        if message.get("type") == "message":
                            _tell(owner, message["data"])
            except (RedisError, OSError) as exc:
                if self._closing:
                    return
                if not deaf:
                    _log.warning("asks from other processes are not heard (Redis: %s)", exc)
                deaf = True
                await asyncio.sleep(1.0)

    def start(self, owner: Owner) -> None:
        self._listening = asyncio.get_running_loop().create_task(self.listen(owner))

    async def close(self) -> None:
        """The mirrors finish their streams' ends (a couple of seconds at most). A
        listener redis-py kept from its cancel (seen: parked again on a read without a
        timeout) ends when its connection is closed, so closing never waits forever."""
        self._closing = True
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=2.0)
        tasks = [*self._tasks, *([self._listening] if self._listening else [])]
        await stopped(tasks, within=1.0)
        await self._client.aclose()
        await self._listener.aclose()
        await stopped(tasks, within=1.0)

    # --- any other process ----------------------------------------------------------

    async def find(self, request_id: str, account_id: str) -> Mirrored | None:
        """The account's stream as mirrored; None when there is none (or another's)."""
        if not _REQUEST_ID.fullmatch(request_id):
            return None
        try:
            described, last = await self._described(request_id)
            if described is None:  # nobody asked for it yet: ask its owner to mirror it
                await self._ask("want", request_id, account_id)
                loop = asyncio.get_running_loop()
                deadline, pause = loop.time() + WANT_WAIT, 0.01
                while described is None and loop.time() < deadline:
                    await asyncio.sleep(pause)
                    pause = min(pause * 2, 0.2)
                    described, last = await self._described(request_id)
        except (RedisError, OSError) as exc:
            raise _unavailable(exc) from None
        if described is None:
            return None
        try:
            found = msgspec.msgpack.decode(described, type=_Meta)
        except msgspec.DecodeError:
            return None
        if found.account_id != account_id:
            return None
        count, ended = _standing(last)
        return Mirrored(
            request_id,
            headers=found.headers,
            keepalive=found.keepalive,
            opening=found.opening,
            count=count,
            ended=ended,
        )

    async def _described(self, request_id: str) -> tuple[bytes | None, Any]:
        names = self._names(request_id)
        async with self._client.pipeline(transaction=False) as pipe:
            pipe.get(names.meta)
            pipe.xrevrange(names.stream, count=1)
            described, last = await pipe.execute()
        return described, last

    async def tail(self, request_id: str, after: int) -> AsyncGenerator[list[bytes] | str, None]:
        """The events after event ``after``, in batches, then how it ended: its ending's
        name, or ``lost`` when its owner died first."""
        try:
            async for got in self._tail(request_id, after):
                yield got
        except (RedisError, OSError) as exc:
            _log.warning("stream %s could not be read on (Redis: %s)", request_id, exc)
            yield "lost"

    async def _tail(self, request_id: str, after: int) -> AsyncGenerator[list[bytes] | str, None]:
        names = self._names(request_id)
        stream, owner = names.stream, names.owner
        last = after
        while True:
            got: Any = await self._client.xread({stream: f"0-{last}"}, count=500, block=_BLOCK_MS)
            if not got:
                if await self._client.exists(owner):
                    continue
                got = await self._client.xread({stream: f"0-{last}"}, count=500)
                if not got:
                    yield "lost"
                    return
            events: list[bytes] = []
            for number, fields in _entries(got[0][1]):
                ending = fields.get(_END)
                if ending is not None:
                    yield events
                    yield ending.decode()
                    return
                batch = _split(fields[_EVENTS])
                events += batch[len(batch) - (number - last) :]  # those after ``last``
                last = number
            yield events

    async def first(self, request_id: str) -> bytes | None:
        """Its first event, if it was mirrored."""
        try:
            got = _entries(await self._client.xrange(self._names(request_id).stream, count=1))
        except (RedisError, OSError) as exc:
            raise _unavailable(exc) from None
        if not got or _EVENTS not in got[0][1]:
            return None
        return _split(got[0][1][_EVENTS])[0]

    async def stop(self, request_id: str, account_id: str) -> tuple[str, int]:
        """Ask every process to stop the stream (its owner does), then how it ended and
        its events, once its mirror says so: ``cancelled``, or the ending it reached
        first; ``lost`` when its owner is gone. 503 when neither comes in time."""
        names = self._names(request_id)
        try:
            await self._ask("stop", request_id, account_id)
            loop = asyncio.get_running_loop()
            deadline, pause = loop.time() + STOP_WAIT, 0.005
            while loop.time() < deadline:
                async with self._client.pipeline(transaction=False) as pipe:
                    pipe.xrevrange(names.stream, count=1)
                    pipe.exists(names.owner)
                    last, running = await pipe.execute()
                count, ended = _standing(last)
                if ended is not None or not running:
                    return ended or "lost", count
                await asyncio.sleep(pause)
                pause = min(pause * 2, 0.1)
        except (RedisError, OSError) as exc:
            raise _unavailable(exc) from None
        raise ServiceUnavailableError(
            f"The process running stream {request_id} did not confirm the stop in time.",
            code="relay_unavailable",
        )

    async def _ask(self, kind: str, request_id: str, account_id: str) -> None:
        await self._client.publish(
            self._channel, msgspec.msgpack.encode(_Asked(kind, request_id, account_id))
        )


def _standing(last: Any) -> tuple[int, str | None]:
    """A mirror's events so far and its ending (None while it runs), from its last entry."""
    count, ended = 0, None
    for number, fields in _entries(last):
        ending = fields.get(_END)
        count = number - (1 if ending is not None else 0)
        ended = None if ending is None else ending.decode()
    return count, ended


def _tell(owner: Owner, data: Any) -> None:
    """One ask heard on the channel, told to ``owner``."""
    try:
        asked = msgspec.msgpack.decode(data, type=_Asked)
    except (msgspec.DecodeError, TypeError):
        return
    told = owner.stop_asked if asked.kind == "stop" else owner.wanted
    told(asked.request_id, asked.account_id)


def _split(joined: bytes) -> list[bytes]:
    """A batch's events (each ends with its blank line, as sent)."""
    return [event + _SEPARATOR for event in joined.split(_SEPARATOR)[:-1]]


def _unavailable(exc: BaseException) -> ServiceUnavailableError:
    _log.warning("streams of other processes cannot be reached (Redis: %s)", exc)
    return ServiceUnavailableError(
        "Streams running on other processes cannot be reached now (Redis is unavailable).",
        code="relay_unavailable",
    )
