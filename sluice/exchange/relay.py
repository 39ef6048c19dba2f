"""Resumable streams (docs/api.md#resumable-streams): a stream's encoded events kept, each
with an SSE ``id:`` line, so a client cut off reconnects with ``Last-Event-ID`` and
gets every event after it, then the live tail, then the door's normal end.

A :class:`Relay` is one stream's; it is fed the bytes the door's encoder made (whole
events), stamps and keeps them, and hands back what goes to the client now. When the
client leaves, the exchange reads the upstream on into the relay (no client, metered
as usual) while a reconnect follows it. :class:`Relays` holds the process's relays by
request id: a stream nobody reads is cancelled after ``resume_retention`` seconds, a
finished one is forgotten that long after its end, and the ids of forgotten ones are
remembered (bounded) so a late reconnect learns why (410 ``stream_expired``).
With ``[limits] redis_url`` one another process asks for is mirrored to Redis, where
that process reads it (:mod:`sluice.storage.mirror`); without, a reconnect must reach the process
that serves it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Literal, Protocol

from sluice.config import StreamsConfig
from sluice.errors import NotFoundError, StreamExpiredError
from sluice.exchange.ports import ClientStream, Headers

if TYPE_CHECKING:
    from sluice.storage.mirror import StreamMirror

RESUME_PREFIX = "/v1/streams/"
RESUME_HEADER = "x-sluice-resume-url"
_SEPARATOR = b"\n\n"
DELIVERED_KEPT = 10.0
"""Seconds a stream that ended on its first client's line is kept for a reconnect."""
_FORGOTTEN_KEPT = 10_000
"""Forgotten streams whose ids are remembered, with why (the oldest go first)."""

Ending = Literal["complete", "failed", "cancelled", "abandoned"]
Write = Callable[[bytes], Awaitable[None]]


class End(Protocol):
    async def __call__(self, data: bytes = b"", close: bool = False) -> None: ...


class Relay:
    """One resumable stream's events, in order; event ``n`` (from 1) is ``events[n-1]``."""

    __slots__ = (
        "_changed",
        "_partial",
        "_stamp",
        "account_id",
        "count",
        "ended",
        "events",
        "headers",
        "keepalive",
        "max_bytes",
        "mirrored",
        "opening",
        "overflowed",
        "readers",
        "request_id",
        "retention",
        "size",
        "task",
        "timer",
    )

    def __init__(self, request_id: str, account_id: str, max_bytes: int) -> None:
        self.request_id = request_id
        self.account_id = account_id
        self.max_bytes = max_bytes
        self.events: list[bytes] = []
        self.size = 0
        self.headers: Headers = []
        """The stream's own headers (its door's, the resume URL), sent again to a
        reconnect."""
        self.keepalive = b""
        """Its door's keep-alive comment, sent to a reconnect waiting for the tail."""
        self.retention = 0.0
        """Seconds it is kept after it ends (and its mirror, if it has one)."""
        self.mirrored = False
        """Another process asked for it: its events are mirrored to Redis."""
        self.opening = b""
        """A background response's object as created (a poll's answer before the first
        event, on any process)."""
        self.ended: Ending | None = None
        self.overflowed = False
        """Past ``max_bytes``: its events are dropped and it cannot be resumed."""
        self.readers = 1
        """Clients reading it now: its first, until it leaves, then reconnects."""
        self.task: asyncio.Task[object] | None = None
        """What runs the stream now: its request's, then the read-on after a cut."""
        self.timer: asyncio.TimerHandle | None = None
        """While nobody reads it: when it is given up."""
        self.count = 0
        """Events stamped so far (the last one's number)."""
        self._changed: asyncio.Event | None = None
        self._partial = b""
        self._stamp = b"id: " + request_id.encode() + b"."

    def stamp(self, data: bytes) -> bytes:
        """``data``'s whole events, each with its id line, kept; what to send now. A
        comment (a keep-alive) is sent unkept and unnumbered."""
        if self._partial:
            data, self._partial = self._partial + data, b""
        events = data.split(_SEPARATOR)
        self._partial = events.pop()  # after the last separator: b"" when data ends whole
        out = []
        for event in events:
            if event[:1] == b":" or not event:  # a comment (keep-alive): unkept
                out.append(event + _SEPARATOR)
                continue
            self.count += 1
            stamped = b"%s%d\n%s\n\n" % (self._stamp, self.count, event)
            out.append(stamped)
            if not self.overflowed:
                self.size += len(stamped)
                self.overflowed = self.size > self.max_bytes
                if self.overflowed:
                    self.events.clear()
                else:
                    self.events.append(stamped)
        self._wake()
        return out[0] if len(out) == 1 else b"".join(out)

    def finish(self, ending: Ending) -> None:
        """It ended (the first ending named is kept)."""
        if self.ended is None:
            self.ended = ending
        self._wake()

    def _wake(self) -> None:
        changed = self._changed
        if changed is not None:  # a reconnect waits
            self._changed = None
            changed.set()

    def signal(self) -> asyncio.Event:
        """Set at the next event, or the end (take it before reading the events)."""
        if self._changed is None:
            self._changed = asyncio.Event()
        return self._changed

    def after(self, last: int) -> list[bytes]:
        return self.events[last:]


class Relays:
    """The process's resumable streams, by request id; one another process asks for is
    mirrored to ``share`` (:mod:`sluice.storage.mirror`)."""

    __slots__ = ("_by_id", "_forgotten", "_running_alone", "share")

    def __init__(self, share: StreamMirror | None = None) -> None:
        self.share = share
        self._by_id: dict[str, Relay] = {}
        self._forgotten: dict[str, str] = {}
        self._running_alone: dict[str, int] = {}
        """Streams of each account running on with no client reading them."""

    def open(self, request_id: str, account_id: str, config: StreamsConfig) -> Relay:
        relay = Relay(request_id, account_id, config.resume_max_bytes)
        relay.retention = config.resume_retention
        self._by_id[request_id] = relay
        return relay

    def wanted(self, request_id: str, account_id: str) -> None:
        """Another process asks for a stream: mirrored from its start if this one runs
        it (or still keeps it), once. The mirror counts as a reader (one elsewhere
        may read it for longer than the retention) until it holds the end; one that
        failed may be asked for again."""
        relay = self._by_id.get(request_id)
        if relay is None or relay.account_id != account_id or relay.mirrored:
            return
        if self.share is not None:
            relay.mirrored = True
            self.reading(relay)
            mirroring = self.share.mirror(relay, relay.retention)
            mirroring.add_done_callback(partial(self._mirror_ended, relay))

    def _mirror_ended(self, relay: Relay, mirroring: asyncio.Task[bool]) -> None:
        relay.mirrored = not mirroring.cancelled() and mirroring.result()
        relay.readers -= 1
        if relay.readers == 0 and relay.ended is None and relay.timer is None:
            self._alone(relay)

    def stop_asked(self, request_id: str, account_id: str) -> None:
        """A stop asked on another process: this one stops the stream if it runs it."""
        relay = self._by_id.get(request_id)
        if relay is not None and relay.account_id == account_id:
            self.cancel(relay)

    def find(self, request_id: str, account_id: str) -> Relay:
        """The account's stream; 404 for another account's or an unknown one, 410 for
        one forgotten or no longer resumable."""
        relay = self._by_id.get(request_id)
        if relay is not None and relay.account_id == account_id:
            if relay.overflowed:
                raise StreamExpiredError(
                    f"The stream {request_id} outgrew its buffer and cannot be resumed."
                )
            return relay
        why = self._forgotten.get(request_id)
        if why is not None and why.startswith(account_id + " "):
            raise StreamExpiredError(why.partition(" ")[2])
        raise NotFoundError(f"No resumable stream {request_id[:64]} for this key's account.")

    def may_run_alone(self, relay: Relay, config: StreamsConfig) -> bool:
        """Its first client left: may the stream run on (resumable, not stopped, within
        the account's cap when nobody else reads it)? If so, and nobody reads it, it is
        counted and timed until a reader comes back or it ends."""
        if relay.overflowed or relay.ended is not None:
            return False
        alone = self._running_alone.get(relay.account_id, 0)
        if relay.readers == 1 and alone >= config.resume_per_account:
            return False
        self.left(relay)
        return True

    def reading(self, relay: Relay) -> None:
        """A reconnect reads it: no longer alone."""
        if relay.timer is not None:
            relay.timer.cancel()
            relay.timer = None
            self._count(relay.account_id, -1)
        relay.readers += 1

    def left(self, relay: Relay) -> None:
        """A reader stopped reading (its first client, or a reconnect); nobody else
        does: counted as running alone, given up after the retention."""
        relay.readers -= 1
        if relay.readers == 0 and relay.ended is None and relay.timer is None:
            self._alone(relay)

    def _alone(self, relay: Relay) -> None:
        """Nobody reads it: counted as running alone, given up after its retention."""
        self._count(relay.account_id, 1)
        loop = asyncio.get_running_loop()
        relay.timer = loop.call_later(relay.retention, self._abandon, relay)

    def ended(self, relay: Relay, config: StreamsConfig, *, delivered: bool) -> None:
        """The stream ended (it was finished first): kept ``resume_retention`` seconds
        more for reconnects, or :data:`DELIVERED_KEPT` when its first client was still
        on the line at the end (only a client that lost the very last bytes comes
        back; keeping every stream for minutes would hold every answer served)."""
        if relay.timer is not None:
            relay.timer.cancel()
            relay.timer = None
            self._count(relay.account_id, -1)
        keep = (
            min(DELIVERED_KEPT, config.resume_retention) if delivered else config.resume_retention
        )
        loop = asyncio.get_running_loop()
        loop.call_later(keep, self._forget, relay, "its retention passed")

    def _abandon(self, relay: Relay) -> None:
        """Nobody came back within the retention: cancel it, charged for what it made."""
        relay.timer = None
        self._count(relay.account_id, -1)
        relay.finish("abandoned")
        self._forget(relay, "nobody resumed it in time")
        if relay.task is not None:
            relay.task.cancel()

    def _count(self, account_id: str, change: int) -> None:
        count = self._running_alone.get(account_id, 0) + change
        if count > 0:
            self._running_alone[account_id] = count
        else:
            self._running_alone.pop(account_id, None)

    def _forget(self, relay: Relay, why: str) -> None:
        if self._by_id.get(relay.request_id) is not relay:
            return  # forgotten already (cancelled, abandoned)
        del self._by_id[relay.request_id]
        if len(self._forgotten) >= _FORGOTTEN_KEPT:
            del self._forgotten[next(iter(self._forgotten))]
        ended = relay.ended or "cancelled"
        self._forgotten[relay.request_id] = (
            f"{relay.account_id} The stream {relay.request_id} ended ({ended}) and {why}."
        )

    def cancel(self, relay: Relay) -> None:
        """``DELETE``: stop it now, charged for what it made."""
        if relay.ended is None:
            relay.finish("cancelled")
            self._forget(relay, "it was cancelled")
            if relay.task is not None:
                relay.task.cancel()


class Resumption:
    """A resumable stream as its exchange runs it: asked for at the door, registered
    when its stream begins (a request refused before that leaves nothing behind), the
    relay between the encoder and the client, kept for reconnects when it ends."""

    __slots__ = (
        "_closed",
        "_relay",
        "account_id",
        "config",
        "on_begin",
        "relays",
        "request_id",
        "running_on",
        "unwatched",
    )

    def __init__(
        self,
        relays: Relays,
        request_id: str,
        account_id: str,
        config: StreamsConfig,
    ) -> None:
        self.relays = relays
        self.request_id = request_id
        self.account_id = account_id
        self.config = config
        self.on_begin: Callable[[Relay], None] | None = None
        """Told when the stream begins (a background response: it was admitted)."""
        self.unwatched = False
        """Nobody is on the line (a background response): its writer keeps the events,
        and they are kept the whole retention after it ends."""
        self.running_on = False
        """The client left and the stream runs on for a reconnect."""
        self._relay: Relay | None = None
        self._closed = False

    @property
    def relay(self) -> Relay:
        assert self._relay is not None, "begin() first"
        return self._relay

    @property
    def begun(self) -> Relay | None:
        """Its relay, once the stream began."""
        return self._relay

    def begin(
        self,
        call_headers: Headers,
        stream_headers: Sequence[tuple[str, str]],
        keepalive: bytes,
    ) -> Headers:
        """The stream begins (admitted): registered, its task the one a ``DELETE``
        cancels from now on; the response's headers, the resume URL among them (a
        keep-alive may send them before the first event)."""
        relay = self._relay = self.relays.open(self.request_id, self.account_id, self.config)
        relay.task = asyncio.current_task()
        relay.headers = [*stream_headers, (RESUME_HEADER, RESUME_PREFIX + relay.request_id)]
        relay.keepalive = keepalive
        if self.on_begin is not None:
            self.on_begin(relay)
        return [*call_headers, *relay.headers]

    def bind(self, writer: ClientStream) -> tuple[Write, End]:
        """The stream's writes and its end, through the relay (an unwatched stream's
        writer keeps them itself)."""
        if self.unwatched:
            return writer.write, writer.end
        relay = self.relay

        async def write(data: bytes) -> None:
            await writer.write(relay.stamp(data))

        async def end(data: bytes = b"", close: bool = False) -> None:
            out = relay.stamp(data)
            self.done("failed" if close else "complete")
            await writer.end(out, close=close)

        return write, end

    def run_on(self, task: asyncio.Task[None] | None) -> None:
        """The stream reads on without its client, in ``task``."""
        self.running_on = True
        self.relay.task = task

    def done(self, ending: Ending) -> None:
        """It ended (the first ending named is kept); kept for reconnects a while."""
        relay = self._relay
        if relay is None:
            return
        relay.finish(ending)
        if not self._closed:
            self._closed = True
            delivered = not self.running_on and not self.unwatched
            self.relays.ended(relay, self.config, delivered=delivered)
