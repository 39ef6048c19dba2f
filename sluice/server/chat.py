"""``POST /v1/chat/completions``: decode, plan, hold credits, then stream or answer whole.

The streaming loop is the hot path: per upstream read it feeds the translator,
encodes what came out and writes it, nothing else. Usage, cost and the charge are
computed once, at the end. A failure after the first event becomes the error event
(with the partial usage when the client asked for usage) and the connection closes
without ``[DONE]``. What happened is kept in the call's :class:`Outcome`, which the
gateway turns into the request-log row and the settlement when the request ends.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from sluice.errors import ApiError, RateLimitError
from sluice.limits.headers import rate_limit_headers
from sluice.metering.charges import hold_amount
from sluice.metering.tokens import estimate_prompt_tokens
from sluice.routing.plan import Attempt, Plan
from sluice.routing.router import OpenedStream, scrub_secrets
from sluice.server.keepalive import KeepAlive
from sluice.server.outcome import Outcome
from sluice.server.responses import JSON, SSE_HEADERS
from sluice.wire.chat import ChatRequest
from sluice.wire.chunks import ChatCompletion
from sluice.wire.encode import ChunkEncoder, StreamIdentity
from sluice.wire.errors import error_event, invalid_body_error
from sluice.wire.sse import DONE_EVENT

if TYPE_CHECKING:
    from sluice.server.app import Call, Gateway

_REQUEST = msgspec.json.Decoder(ChatRequest)
_ENCODER = msgspec.json.Encoder()


def decode_chat_request(body: bytes) -> ChatRequest:
    if not body:
        raise invalid_body_error(msgspec.DecodeError("input data was truncated"))
    try:
        return _REQUEST.decode(body)
    except msgspec.DecodeError as exc:
        raise invalid_body_error(exc) from None


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
    req = decode_chat_request(call.request.body)
    assert call.principal is not None
    outcome = call.outcome = Outcome(req)
    view = await gw.tenants.view(call.principal.account_id)
    outcome.prices = view.prices
    plan = outcome.plan = view.planner.plan(req.model, req.models or ())
    subject = gw.limit_subject(call.principal)
    if subject is not None:
        decision = await gw.limiter.admit(subject, estimate_prompt_tokens(req))
        call.headers.extend(rate_limit_headers(decision))
        if not decision.allowed:
            raise RateLimitError(
                f"Rate limit reached for {', '.join(decision.exceeded)}.",
                code="rate_limit_exceeded",
                retry_after=decision.retry_after,
            )
        call.limit_ticket = decision.ticket
    amount = hold_amount(req, [(a.model, gw.rate(a, view.prices)) for a in plan.attempts])
    outcome.ticket = await gw.meter.hold(call.principal, call.request_id, amount)
    if req.is_stream:
        await _stream(gw, call, outcome, plan)
    else:
        await _complete(gw, call, outcome, plan)


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


async def _stream(gw: Gateway, call: Call, outcome: Outcome, plan: Plan) -> None:
    req = outcome.req
    opened = await _open(gw, call, outcome, plan)
    attempt, resp, translator = opened.attempt, opened.response, opened.translator
    encoder = ChunkEncoder(_identity(call, attempt, plan))
    writer = call.writer
    pending = encoder.events(opened.first) if opened.first else b""
    gw.metrics.streams.inc()
    try:
        writer.start(200, [*call.headers, *SSE_HEADERS])
        if not opened.ended:
            await writer.write(pending)
            pending = b""
            if translator.failure is not None:
                raise translator.failure
            read, feed, write, events = (
                resp.read_chunk,
                translator.feed,
                writer.write,
                encoder.events,
            )
            while data := await read():
                batch = feed(data)
                if batch:
                    await write(events(batch))
                if translator.failure is not None:
                    raise translator.failure
            tail = translator.finish()
            if tail:
                await write(events(tail))
            resp.release()
    except ApiError as exc:
        resp.close()
        outcome.error = err = scrub_secrets(exc, attempt.target)
        usage = outcome.wire_usage(cut=True) if req.include_usage else None
        await writer.end(pending + error_event(err, usage), close=True)
        return
    except BaseException:
        resp.close()
        raise
    finally:
        gw.metrics.streams.dec()
    last = pending + DONE_EVENT
    if req.include_usage:
        usage = outcome.wire_usage(cut=False)
        assert usage is not None
        last = pending + encoder.usage_event(usage, outcome.credits_used()) + DONE_EVENT
    await writer.end(last)


async def _complete(gw: Gateway, call: Call, outcome: Outcome, plan: Plan) -> None:
    done = await gw.router.complete(outcome.req, plan, call.attempts)
    outcome.attempt, outcome.completion = done.attempt, done.result
    outcome.rate = gw.rate(done.attempt, outcome.prices)
    outcome.first_token = gw.clock() - call.started
    usage = outcome.wire_usage(cut=False)
    assert usage is not None
    body = ChatCompletion(
        **msgspec.structs.asdict(_identity(call, done.attempt, plan)),
        choices=done.result.choices,
        usage=usage,
    )
    credits = outcome.credits_used()
    if credits is not None:
        body.credits_used = credits
    outcome.sent = True
    await call.writer.send(200, [*call.headers, JSON], _ENCODER.encode(body))
