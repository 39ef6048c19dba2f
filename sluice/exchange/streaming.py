"""A streamed answer: failover until the first event, then the upstream pumped into the
front door's encoder; the hot path is :meth:`UpstreamStream.pump` with a sink that
encodes and writes, nothing else.

A failure after the first event becomes the door's error event (with the partial usage
when the client asked for usage) and the connection closes without the end marker.
When an output guardrail applies it sits between the translator and the encoder;
otherwise the loop is untouched. A client that leaves cancels the upstream call, or
on a ``drain`` connection the rest is read unsent so the provider's usage is charged
(docs/api.md#credits-and-cancellation). A resumable stream's writes go through its
relay (:mod:`.relay`), and when its client leaves it is read on into the relay for a
reconnect (docs/api.md#resumable-streams).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import msgspec

from sluice.cache.flight import Flight
from sluice.core.batch import ChunkBatch
from sluice.core.tally import Tally
from sluice.core.tokens import estimate_prompt_tokens
from sluice.errors import ApiError
from sluice.exchange.cached import finished, unjoined
from sluice.exchange.keepalive import KeepAlive
from sluice.exchange.ports import ClientGoneError, StreamEncoder
from sluice.exchange.relay import End, Resumption, Write
from sluice.exchange.replay import replay
from sluice.exchange.state import ExchangeState
from sluice.guardrails.checks import OutputGuard
from sluice.guardrails.selection import RuleSet
from sluice.routing.upstream import Sink, UpstreamStream

if TYPE_CHECKING:
    from sluice.exchange.exchange import Exchange


async def stream(
    ex: Exchange, state: ExchangeState, output: RuleSet, resume: Resumption | None = None
) -> None:
    services, door = ex.services, ex.door
    headers = [*ex.headers, *door.stream_headers]
    if resume is not None:  # registered now, admitted; its URL in the first head sent
        headers = resume.begin(ex.headers, door.stream_headers, door.keepalive)
    ticker = KeepAlive(ex.writer, headers, services.keepalive_interval, door.keepalive)
    try:
        await _stream(ex, state, output, headers, resume)
    finally:
        ticker.stop()
        if resume is not None and not resume.running_on and not resume.unwatched:
            resume.done("cancelled")  # a no-op once it ended otherwise


async def _stream(
    ex: Exchange,
    state: ExchangeState,
    output: RuleSet,
    headers: list[tuple[str, str]],
    resume: Resumption | None,
) -> None:
    upstream = await _open(ex, state, headers)
    encoder = ex.door.stream_encoder(
        state.serve(upstream.attempt), lambda: _opening(state), state.req
    )
    writer, metrics = ex.writer, ex.services.metrics
    events, flight = encoder.events, state.flight
    write: Write = writer.write
    end: End = writer.end
    if resume is not None:
        write, end = resume.bind(writer)
    guard = None
    if output:
        guard = OutputGuard(output, request_id=state.request_id, notes=state.guardrails)
    pending = b""
    metrics.streams.inc()
    try:
        first = upstream.take_first()
        if flight is not None:
            flight.record(first)
        if guard is not None:
            first = await guard.filter(first)
            if upstream.ended:
                first += await guard.finish()
        pending = events(first) if first else b""
        del first  # written once; not kept for the whole stream
        writer.start(200, headers)
        if guard is not None and guard.failure is not None:
            raise guard.failure
        if not upstream.ended:
            await write(pending)
            pending = b""
            await _pump(upstream, guard, write, events, flight)
    except ApiError as err:
        upstream.close()
        await end(pending + _failed(state, encoder, err), close=True)
        return
    except (ClientGoneError, asyncio.CancelledError):
        if resume is None:
            _client_left(ex, state, upstream)
        else:
            _resumable_left(ex, state, upstream, resume, encoder=encoder, guard=guard)
        raise
    except BaseException:
        upstream.close()
        raise
    finally:
        metrics.streams.dec()
    await end(pending + _ended(ex, state, encoder))


def _failed(state: ExchangeState, encoder: StreamEncoder, err: ApiError) -> bytes:
    """The error event ending a stream that began (with the usage so far, if asked);
    the same for the requests that joined it."""
    state.error = err
    if state.flight is not None:
        state.flight.failed(err)
    tally = state.tally(cut=True, credits=False) if state.req.include_usage else None
    return encoder.failure(err, tally)


def _ended(ex: Exchange, state: ExchangeState, encoder: StreamEncoder) -> bytes:
    """A stream read to its end: complete, kept by a door that remembers; its usage
    (if asked) and end marker."""
    state.completed = True
    finished(state)
    include = state.req.include_usage
    ending = encoder.ending(state.tally(cut=False, credits=True) if include else None)
    ex.remember(state, encoder)
    return ending


def _opening(state: ExchangeState) -> Tally | None:
    """The usage known at the first event, for a door that shows it there (once): the
    upstream's own early counts (Anthropic's ``message_start``, Gemini's every chunk),
    else the prompt estimate, which :meth:`ExchangeState.tokens` gives while nothing is
    reported. An early report without a prompt count (an upstream that counts the prompt
    only at the end) gets the estimate too: no prompt is empty. The end corrects it."""
    tokens = state.tokens()
    if tokens is not None and tokens.prompt_tokens == 0:
        prompt = estimate_prompt_tokens(state.req)
        tokens = msgspec.structs.replace(
            tokens, prompt_tokens=prompt, provider_cost=None, estimated=True
        )
    usage = state.priced(tokens, True)
    return None if tokens is None or usage is None else Tally(usage, tokens.cache_write_tokens)


async def _open(
    ex: Exchange, state: ExchangeState, headers: list[tuple[str, str]]
) -> UpstreamStream:
    """Failover until one attempt produced its first event; a cache hit's replay, or
    the stream of the identical request it joined (when that one was left before its
    first event, a miss going upstream itself: ``headers`` say so)."""
    services = ex.services
    assert state.plan is not None
    upstream = None
    note = state.cache
    if note is not None and state.replaying:
        upstream = await replay(note, services.clock)
        if upstream is None:
            state.cache = unjoined(note, (ex.headers, headers), sent=ex.writer.started)
    if upstream is None:
        upstream = await _upstream(ex, state)
    state.translator = upstream.translator
    state.first_token = services.clock() - state.started
    state.sent = True
    services.metrics.first_token(state.first_token)
    return upstream


async def _upstream(ex: Exchange, state: ExchangeState) -> UpstreamStream:
    """The router's stream; a flight this request leads opens, or fails, with it."""
    assert state.plan is not None
    flight = state.flight
    try:
        upstream = await ex.services.router.open_stream(
            state.req, state.plan, state.attempts, ex.traced
        )
    except ApiError as err:
        if flight is not None:  # its joiners need not wait for this request's settling
            flight.failed(err)
        raise
    if flight is not None:
        flight.opened(upstream.attempt)
    return upstream


async def _pump(
    upstream: UpstreamStream,
    guard: OutputGuard | None,
    write: Callable[[bytes], Awaitable[None]],
    events: Callable[[ChunkBatch], bytes],
    flight: Flight | None,
) -> None:
    """After the first event: straight from translator to encoder, or through the guard;
    a led flight records each batch as the translator gives it."""
    if guard is None:

        async def sink(batch: ChunkBatch) -> None:
            await write(events(batch))

        await upstream.pump(sink if flight is None else _recorded(flight, sink))
        return
    guarded = _guarded(guard, write, events)
    await upstream.pump(guarded if flight is None else _recorded(flight, guarded))
    tail = await guard.finish()
    if tail:
        await write(events(tail))
    if guard.failure is not None:
        raise guard.failure


def _guarded(
    guard: OutputGuard,
    write: Callable[[bytes], Awaitable[None]],
    events: Callable[[ChunkBatch], bytes],
) -> Sink:
    """The sink with the output guardrails between translator and encoder."""

    async def sink(batch: ChunkBatch) -> None:
        if batch := await guard.filter(batch):
            await write(events(batch))
        if guard.failure is not None:
            raise guard.failure

    return sink


def _recorded(flight: Flight, sink: Sink) -> Sink:
    async def recorded(batch: ChunkBatch) -> None:
        flight.record(batch)
        await sink(batch)

    return recorded


def _client_left(ex: Exchange, state: ExchangeState, upstream: UpstreamStream) -> None:
    """Mid-stream disconnect: close the upstream call, or read it on unsent (``drain``,
    or while requests that joined it still read)."""
    drains = upstream.attempt.target.connection.on_disconnect == "drain" and not state.replaying
    joined = state.flight is not None and not state.flight.deserted
    read_on = (drains or joined) and not upstream.ended
    if not read_on or not ex.drain(lambda: _drain(state, upstream, drains)):
        upstream.close()


async def _drain(state: ExchangeState, upstream: UpstreamStream, drains: bool) -> None:
    """Read on unsent, recorded for the requests that joined (on a connection that does
    not drain, until none of them reads)."""
    flight = state.flight
    sink = _unsent if flight is None else _read_on(flight, until_deserted=not drains)
    try:
        await upstream.pump(sink)
    except ApiError as err:
        state.error = err
        if flight is not None:
            flight.failed(err)
        return
    except _DesertedError:
        upstream.close()
        return
    except BaseException:
        upstream.close()
        raise
    state.completed = True
    finished(state)


def _read_on(flight: Flight, *, until_deserted: bool) -> Sink:
    async def record(batch: ChunkBatch) -> None:
        if until_deserted and flight.deserted:
            raise _DesertedError
        flight.record(batch)

    return record


async def _unsent(batch: ChunkBatch) -> None:
    """A drain's sink: the client is gone."""


def _resumable_left(
    ex: Exchange,
    state: ExchangeState,
    upstream: UpstreamStream,
    resume: Resumption,
    *,
    encoder: StreamEncoder,
    guard: OutputGuard | None,
) -> None:
    """A resumable stream's client left, or it was stopped: read on for a reconnect,
    else as a plain stream; a stopped one (``DELETE``) never reads on."""
    if _run_on(ex, state, upstream, resume, encoder=encoder, guard=guard):
        return
    if resume.relay.ended is None:  # past its bounds: as a plain stream
        _client_left(ex, state, upstream)
    else:
        upstream.close()


def _run_on(
    ex: Exchange,
    state: ExchangeState,
    upstream: UpstreamStream,
    resume: Resumption,
    *,
    encoder: StreamEncoder,
    guard: OutputGuard | None,
) -> bool:
    """The client of a resumable stream left: read on into its relay for a reconnect.
    False when it may not (cancelled, past its buffer, the account's cap, stopping)."""
    if upstream.ended or not resume.relays.may_run_alone(resume.relay, resume.config):
        return False
    task = ex.drain(
        lambda: _into_relay(ex, state, upstream, resume, encoder=encoder, guard=guard),
        "resumable",
    )
    if task is None:
        return False
    resume.run_on(task)
    return True


async def _into_relay(
    ex: Exchange,
    state: ExchangeState,
    upstream: UpstreamStream,
    resume: Resumption,
    *,
    encoder: StreamEncoder,
    guard: OutputGuard | None,
) -> None:
    """The rest of the stream, encoded into the relay with nobody on the line; it ends
    as it would have for the client (the usage and end marker, or the error event)."""
    relay = resume.relay

    async def keep(data: bytes) -> None:
        relay.stamp(data)
        if relay.overflowed:  # no longer resumable: nobody can have the rest
            raise _OverflowedError

    try:
        await _pump(upstream, guard, keep, encoder.events, state.flight)
    except ApiError as err:
        upstream.close()
        relay.stamp(_failed(state, encoder, err))
        resume.done("failed")
        return
    except _OverflowedError:
        state.disconnect = "abandoned"
        resume.done("abandoned")
        drains = upstream.attempt.target.connection.on_disconnect == "drain"
        if state.flight is None or state.flight.deserted:
            upstream.close()
        else:  # no longer resumable, still read by the requests that joined it
            await _drain(state, upstream, drains)
        return
    except BaseException:
        upstream.close()
        abandoned = relay.ended == "abandoned"
        state.disconnect = "abandoned" if abandoned else "cancel"
        resume.done("abandoned" if abandoned else "cancelled")
        raise
    relay.stamp(_ended(ex, state, encoder))
    resume.done("complete")


class _DesertedError(Exception):
    """A stream read on only for the requests that joined it, none of which reads now."""


class _OverflowedError(Exception):
    """A stream read on for a reconnect outgrew its buffer: nobody can resume it."""
