"""``POST /v1/chat/completions``: decode, plan, hold credits, then stream or answer whole.

The streaming loop is the hot path: per upstream read it feeds the translator,
encodes what came out and writes it, nothing else. Usage, cost and the charge are
computed once, at the end. A failure after the first event becomes the error event
(with the partial usage when the client asked for usage) and the connection closes
without ``[DONE]``. What happened is kept in the call's :class:`Outcome`, which the
gateway turns into the request-log row and the settlement when the request ends.
Guardrails (docs/guardrails.md) check the input before anything else, and sit between
the translator and the client when an output guardrail applies; otherwise the loop
is untouched.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import msgspec

from sluice.errors import ApiError, RateLimitError
from sluice.guardrails.checks import OutputGuard, check_completion, check_input
from sluice.guardrails.selection import RuleSet
from sluice.limits.headers import rate_limit_headers
from sluice.metering.charges import hold_amount
from sluice.metering.tokens import estimate_prompt_tokens
from sluice.providers.base import ChunkBatch, StreamTranslator
from sluice.routing.plan import Attempt, Plan
from sluice.routing.router import Completed, InFlight, OpenedStream
from sluice.server.exchange import ClientGoneError
from sluice.server.keepalive import KeepAlive
from sluice.server.outcome import Outcome
from sluice.server.responses import JSON, SSE_HEADERS
from sluice.transport.http import UpstreamResponse
from sluice.wire.bounds import DEFAULT_MAX_JSON_DEPTH
from sluice.wire.chat import ChatRequest, refuse_overrides
from sluice.wire.chunks import ChatCompletion
from sluice.wire.encode import ChunkEncoder, StreamIdentity
from sluice.wire.errors import decode_body, error_event
from sluice.wire.sse import DONE_EVENT

if TYPE_CHECKING:
    from sluice.server.app import Call, Gateway

_REQUEST = msgspec.json.Decoder(ChatRequest)
_ENCODER = msgspec.json.Encoder()


def decode_chat_request(
    body: bytes | bytearray, max_depth: int = DEFAULT_MAX_JSON_DEPTH
) -> ChatRequest:
    req = decode_body(_REQUEST, body, max_depth)
    refuse_overrides(req)
    return req


def _identity(call: Call, attempt: Attempt, plan: Plan) -> StreamIdentity:
    conn = attempt.target.connection
    return StreamIdentity(
        id=call.request_id,
        created=call.created,
        model=attempt.target.model_id,
        provider=conn.provider,
        connection=conn.id,
        route=attempt.position,
        route_name=plan.route_name,
    )


async def chat_completions(gw: Gateway, call: Call) -> None:
    req = decode_chat_request(call.request.body, gw.settings.server.max_json_depth)
    call.request.body = b""  # decoded: the raw bytes need not live as long as the request
    assert call.principal is not None
    outcome = call.outcome = Outcome(req)
    subject = gw.limit_subject(call.principal)
    if subject is not None:  # first: refused requests cost nothing downstream
        decision = await gw.limiter.admit(subject, estimate_prompt_tokens(req))
        call.headers.extend(rate_limit_headers(decision))
        if not decision.allowed:
            raise RateLimitError(
                f"Rate limit reached for {', '.join(decision.exceeded)}.",
                code="rate_limit_exceeded",
                retry_after=decision.retry_after,
            )
        call.limit_ticket = decision.ticket
    rules = gw.guardrails.select(call.principal, req.model)
    if rules.input:  # before routing and before any credit hold (SPEC §6)
        req = outcome.req = await check_input(
            req, rules.input, request_id=call.request_id, notes=outcome.guardrails
        )
    view = await gw.tenants.view(call.principal.account_id)
    outcome.prices = view.prices
    plan = outcome.plan = view.planner.plan(req.model, req.models or ())
    amount = hold_amount(req, [(a.model, gw.rate(a, view.prices)) for a in plan.attempts])
    outcome.ticket = await gw.meter.hold(call.principal, call.request_id, amount)
    if req.is_stream:
        await _stream(gw, call, outcome, plan, rules.output)
    else:
        await _complete(gw, call, outcome, plan, rules.output)


async def _open(gw: Gateway, call: Call, outcome: Outcome, plan: Plan) -> OpenedStream:
    """Failover until one attempt produced its first event, keep-alive comments meanwhile."""
    ticker = KeepAlive(
        call.writer, [*call.headers, *SSE_HEADERS], gw.settings.server.sse_keepalive_interval
    )
    try:
        opened = await gw.router.open_stream(outcome.req, plan, call.attempts)
    finally:
        ticker.stop()
    outcome.attempt, outcome.translator = opened.attempt, opened.translator
    outcome.rate = gw.rate(opened.attempt, outcome.prices)
    outcome.first_token = gw.clock() - call.started
    outcome.sent = True
    gw.metrics.first_token(outcome.first_token)
    return opened


async def _stream(gw: Gateway, call: Call, outcome: Outcome, plan: Plan, output: RuleSet) -> None:
    req = outcome.req
    opened = await _open(gw, call, outcome, plan)
    attempt, resp, translator = opened.attempt, opened.response, opened.translator
    encoder = ChunkEncoder(_identity(call, attempt, plan))
    writer = call.writer
    guard = None
    if output:
        guard = OutputGuard(output, request_id=call.request_id, notes=outcome.guardrails)
    pending = b""
    gw.metrics.streams.inc()
    try:
        first = opened.first
        if guard is not None:
            first = await guard.filter(first)
            if opened.ended:
                first += await guard.finish()
        pending = encoder.events(first) if first else b""
        first = opened.first = []  # written once; not kept for the whole stream
        writer.start(200, [*call.headers, *SSE_HEADERS])
        if guard is not None and guard.failure is not None:
            raise guard.failure
        if not opened.ended:
            await writer.write(pending)
            pending = b""
            if translator.failure is not None:
                raise translator.failure
            if guard is None:
                await _pump(resp, translator, writer.write, encoder.events)
            else:
                await _pump_guarded(resp, translator, guard, writer.write, encoder.events)
            resp.release()
    except ApiError as exc:
        resp.close()
        outcome.error = err = gw.router.scrub(exc, attempt.target)
        usage = outcome.wire_usage(cut=True) if req.include_usage else None
        await writer.end(pending + error_event(err, usage), close=True)
        return
    except (ClientGoneError, asyncio.CancelledError):
        _client_left(gw, call, outcome, opened)
        raise
    except BaseException:
        resp.close()
        raise
    finally:
        gw.metrics.streams.dec()
    outcome.completed = True
    await writer.end(pending + _ending(outcome, encoder))


def _ending(outcome: Outcome, encoder: ChunkEncoder) -> bytes:
    """The events after the last content: the usage chunk when asked for, then [DONE]."""
    if not outcome.req.include_usage:
        return DONE_EVENT
    usage = outcome.wire_usage(cut=False)
    assert usage is not None
    return encoder.usage_event(usage, outcome.credits_used()) + DONE_EVENT


def _client_left(gw: Gateway, call: Call, outcome: Outcome, opened: OpenedStream) -> None:
    """Mid-stream disconnect: close the upstream call, or read it on unsent (``drain``)."""
    drain = opened.attempt.target.connection.on_disconnect == "drain" and not opened.ended
    if not drain or not gw.drain(call, lambda: _drain(gw, outcome, opened)):
        opened.response.close()


async def _pump(
    resp: UpstreamResponse,
    translator: StreamTranslator,
    write: Callable[[bytes], Awaitable[None]],
    events: Callable[[ChunkBatch], bytes],
) -> None:
    """The streaming loop: per upstream read, translate, encode, write; nothing else."""
    read, feed = resp.read_chunk, translator.feed
    while data := await read():
        batch = feed(data)
        if batch:
            await write(events(batch))
        if translator.failure is not None:
            raise translator.failure
    tail = translator.finish()
    if tail:
        await write(events(tail))


async def _pump_guarded(
    resp: UpstreamResponse,
    translator: StreamTranslator,
    guard: OutputGuard,
    write: Callable[[bytes], Awaitable[None]],
    events: Callable[[ChunkBatch], bytes],
) -> None:
    """The streaming loop with the output guardrails between translator and client."""
    while data := await resp.read_chunk():
        batch = translator.feed(data)
        if batch and (batch := await guard.filter(batch)):
            await write(events(batch))
        if guard.failure is not None:
            raise guard.failure
        if translator.failure is not None:
            raise translator.failure
    tail = await guard.filter(translator.finish())
    tail += await guard.finish()
    if tail:
        await write(events(tail))
    if guard.failure is not None:
        raise guard.failure


async def _drain(gw: Gateway, outcome: Outcome, opened: OpenedStream) -> None:
    """The rest of a stream whose client left, read and translated but not sent, so the
    provider's own usage is what gets charged (SPEC §5)."""
    resp = opened.response
    try:
        await _pump(resp, opened.translator, _unsent, _no_events)
        resp.release()
    except ApiError as exc:
        resp.close()
        outcome.error = gw.router.scrub(exc, opened.attempt.target)
        return
    except BaseException:
        resp.close()
        raise
    outcome.completed = True


async def _unsent(data: bytes) -> None:
    """A drain's write: the client is gone."""


def _no_events(batch: ChunkBatch) -> bytes:
    return b""


async def _complete(gw: Gateway, call: Call, outcome: Outcome, plan: Plan, output: RuleSet) -> None:
    if any(a.target.connection.on_disconnect == "drain" for a in plan.attempts):
        done = await _complete_drainable(gw, call, outcome, plan)
    else:
        done = await gw.router.complete(outcome.req, plan, call.attempts)
    _completed(gw, outcome, done)
    outcome.first_token = gw.clock() - call.started
    choices = done.result.choices
    if output:  # a block raises here, before anything is sent; the tokens are charged
        choices = await check_completion(
            choices, output, request_id=call.request_id, notes=outcome.guardrails
        )
    usage = outcome.wire_usage(cut=False)
    assert usage is not None
    body = ChatCompletion(
        **msgspec.structs.asdict(_identity(call, done.attempt, plan)),
        choices=choices,
        usage=usage,
    )
    credits = outcome.credits_used()
    if credits is not None:
        body.credits_used = credits
    outcome.sent = True
    await call.writer.send(200, [*call.headers, JSON], _ENCODER.encode(body))


def _completed(gw: Gateway, outcome: Outcome, done: Completed) -> None:
    outcome.attempt, outcome.completion = done.attempt, done.result
    outcome.completed = True
    outcome.rate = gw.rate(done.attempt, outcome.prices)


async def _complete_drainable(gw: Gateway, call: Call, outcome: Outcome, plan: Plan) -> Completed:
    """The upstream call in a task of its own: if the client leaves while an attempt on
    a ``drain`` connection runs, the answer is still awaited, and charged (SPEC §5)."""
    in_flight = InFlight()
    task = asyncio.ensure_future(gw.router.complete(outcome.req, plan, call.attempts, in_flight))
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        running = in_flight.attempt
        if running is not None and running.target.connection.on_disconnect == "drain":
            in_flight.stopped = True  # that attempt finishes; no failover after it
            if gw.drain(call, lambda: _drain_completion(gw, outcome, task)):
                raise
        task.cancel()
        task.add_done_callback(_retrieve)
        raise


def _retrieve(task: asyncio.Future[Completed]) -> None:
    """Nobody waits for a task cancelled after its client left: mark its error seen."""
    if not task.cancelled():
        task.exception()


async def _drain_completion(gw: Gateway, outcome: Outcome, task: asyncio.Future[Completed]) -> None:
    try:
        done = await task
    except ApiError as exc:
        outcome.error = exc  # the router scrubbed it
        return
    _completed(gw, outcome, done)
