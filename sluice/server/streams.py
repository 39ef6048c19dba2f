"""``GET`` and ``DELETE /v1/streams/{id}``: a resumable stream picked up again after a
cut, or stopped (docs/api.md#resumable-streams). Only the account that made it reaches
it: another's id is a 404 like an unknown one.

A reconnect sends ``Last-Event-ID`` (an event's ``id:``, ``<request id>.<n>``; none:
from the start) and gets every event after it, then the live tail, then the door's
normal end, with the headers the stream was first answered with. ``DELETE`` cancels
the generation at once; what was produced is charged and the rest of the hold released.
"""

from __future__ import annotations

import contextlib
import re
from typing import TYPE_CHECKING

import msgspec

from sluice.errors import InvalidRequestError, NotFoundError, StreamExpiredError
from sluice.exchange.heads import JSON
from sluice.exchange.keepalive import KeepAlive
from sluice.exchange.relay import RESUME_PREFIX, Relay, Relays
from sluice.storage.mirror import Mirrored, StreamMirror

if TYPE_CHECKING:
    from sluice.server.call import Call
    from sluice.server.context import GatewayContext

LAST_EVENT_ID = "last-event-id"
_NUMBER = re.compile(r"[0-9]{1,18}")
_ENCODER = msgspec.json.Encoder()
_GONE = frozenset({"cancelled", "abandoned", "overflowed"})
"""Endings after which a stream is not resumed (410), on any process."""


class StreamState(msgspec.Struct, kw_only=True):
    """``DELETE``'s answer: the stream and how it stands now."""

    id: str
    object: str = "stream"
    status: str
    """``cancelled``, or how it had ended already (``complete``, ``failed``,
    ``abandoned``); ``lost`` when the process that ran it is gone."""
    events: int
    """Events it sent (and kept) before it stopped."""


async def locate(relays: Relays, request_id: str, account_id: str) -> Relay | Mirrored:
    """The account's stream: this process's, else (with Redis) one another process runs
    or ran, as mirrored; 404 / 410 as :meth:`Relays.find` says when neither has it."""
    try:
        return relays.find(request_id, account_id)
    except NotFoundError:
        if relays.share is None:
            raise
        mirrored = await relays.share.find(request_id, account_id)
        if mirrored is None:
            raise
        if mirrored.ended in _GONE:  # as its own process forgets one at once
            raise StreamExpiredError(
                f"The stream {request_id} ended ({mirrored.ended}) and cannot be resumed."
            ) from None
        return mirrored


async def _located(relays: Relays, call: Call) -> Relay | Mirrored:
    assert call.principal is not None
    request_id = call.request.path[len(RESUME_PREFIX) :]
    return await locate(relays, request_id, call.principal.account_id)


def last_event(header: str | None, relay: Relay | Mirrored) -> int:
    """The number of the last event the client has: 0 without ``Last-Event-ID``."""
    if header is None or not header.strip():
        return 0
    stream, _, number = header.strip().rpartition(".")
    if stream != relay.request_id or not _NUMBER.fullmatch(number) or past(int(number), relay):
        raise InvalidRequestError(
            f"Last-Event-ID {header[:80]!r} names no event of stream {relay.request_id}.",
            code="invalid_last_event_id",
            param="Last-Event-ID",
        )
    return int(number)


def past(number: int, relay: Relay | Mirrored) -> bool:
    """Is event ``number`` past the last one sent? (A mirror may lag its owner by a
    batch: a stream another process still runs waits for it instead.)"""
    if isinstance(relay, Relay):
        return number > relay.count
    return relay.ended is not None and number > relay.count


async def resume_stream(relays: Relays, gw: GatewayContext, call: Call) -> None:
    """``GET /v1/streams/{id}``: the events after ``Last-Event-ID``, then the live tail."""
    relay = await _located(relays, call)
    seen = last_event(call.request.headers.get(LAST_EVENT_ID), relay)
    await follow(relays, relay, seen, gw, call)


async def follow(
    relays: Relays, relay: Relay | Mirrored, seen: int, gw: GatewayContext, call: Call
) -> None:
    """The stream's events after the ``seen`` first, then its live tail, then its end,
    to ``call``'s client (one more reader while it reads)."""
    if isinstance(relay, Mirrored):
        assert relays.share is not None
        await _follow_mirrored(relays.share, relay, seen, gw, call)
        return
    headers = [*call.headers, *relay.headers]
    relays.reading(relay)
    ticker = KeepAlive(call.writer, headers, gw.services.keepalive_interval, relay.keepalive)
    try:
        call.writer.start(200, headers)
        while not relay.overflowed:
            changed = relay.signal()  # taken before reading: no event slips between
            events = relay.after(seen)
            if events:
                seen += len(events)
                await call.writer.write(b"".join(events))
            if relay.ended is not None and seen >= len(relay.events):
                break
            await changed.wait()
        await call.writer.end(close=relay.ended != "complete" or relay.overflowed)
    finally:
        ticker.stop()
        relays.left(relay)


async def _follow_mirrored(
    share: StreamMirror, mirrored: Mirrored, seen: int, gw: GatewayContext, call: Call
) -> None:
    """A stream another process runs (or ran), read from its mirror."""
    headers = [*call.headers, *mirrored.headers]
    interval = gw.services.keepalive_interval
    ticker = KeepAlive(call.writer, headers, interval, mirrored.keepalive)
    ending = "lost"
    try:
        call.writer.start(200, headers)
        async with contextlib.aclosing(share.tail(mirrored.request_id, seen)) as tail:
            async for got in tail:
                if isinstance(got, str):
                    ending = got
                    break
                if got:
                    await call.writer.write(b"".join(got))
        await call.writer.end(close=ending != "complete")
    finally:
        ticker.stop()


async def cancel_stream(relays: Relays, gw: GatewayContext, call: Call) -> None:
    """``DELETE /v1/streams/{id}``: stop it now (a stream already ended says how); one
    another process runs is stopped there."""
    relay = await _located(relays, call)
    if isinstance(relay, Mirrored):
        status, count = relay.ended, relay.count
        if status is None:
            assert relays.share is not None and call.principal is not None
            status, count = await relays.share.stop(relay.request_id, call.principal.account_id)
    else:
        relays.cancel(relay)
        status, count = relay.ended or "cancelled", len(relay.events)
    state = StreamState(id=relay.request_id, status=status, events=count)
    await call.writer.send(200, [*call.headers, JSON], _ENCODER.encode(state))
