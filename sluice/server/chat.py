"""``POST /v1/chat/completions``: decode, plan, then stream or answer whole.

The streaming loop is the hot path: per upstream read it feeds the translator,
encodes what came out and writes it, nothing else. Usage is computed once, at the
end. A failure after the first event becomes the error event (with the partial
usage when the client asked for usage) and the connection closes without ``[DONE]``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from sluice.errors import ApiError
from sluice.metering.pricing import priced_usage
from sluice.metering.tokens import TokenUsage, estimate_prompt_tokens, tokens_for_chars
from sluice.routing.plan import Attempt, Plan
from sluice.routing.router import AttemptRecord, scrub_secrets
from sluice.server.keepalive import KeepAlive
from sluice.server.responses import JSON, SSE_HEADERS
from sluice.wire.chat import ChatRequest
from sluice.wire.chunks import ChatCompletion, Usage
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


def _usage(
    req: ChatRequest,
    reported: TokenUsage | None,
    output_chars: int,
    attempt: Attempt,
    *,
    cut: bool,
) -> Usage:
    """Provider-reported usage when there is one, else our estimate (priced if cut)."""
    usage = reported or TokenUsage(
        prompt_tokens=estimate_prompt_tokens(req),
        completion_tokens=tokens_for_chars(output_chars),
        estimated=True,
    )
    return priced_usage(usage, attempt.model.price, price_estimate=cut)


async def chat_completions(gw: Gateway, call: Call) -> None:
    req = decode_chat_request(call.request.body)
    plan = gw.planner.plan(req.model, req.models or ())
    if req.is_stream:
        await _stream(gw, call, req, plan, call.attempts)
    else:
        await _complete(gw, call, req, plan, call.attempts)


async def _stream(
    gw: Gateway, call: Call, req: ChatRequest, plan: Plan, records: list[AttemptRecord]
) -> None:
    ticker = KeepAlive(
        call.writer, [*call.headers, *SSE_HEADERS], gw.settings.server.sse_keepalive_interval
    )
    try:
        opened = await gw.router.open_stream(req, plan, records)
    finally:
        ticker.stop()
    attempt, resp, translator = opened.attempt, opened.response, opened.translator
    encoder = ChunkEncoder(_identity(call, attempt, plan))
    writer = call.writer
    pending = encoder.events(opened.first) if opened.first else b""
    gw.metrics.first_token(gw.clock() - call.started)
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
        err = scrub_secrets(exc, attempt.target)
        usage = None
        if req.include_usage:
            usage = _usage(req, translator.usage, translator.output_chars, attempt, cut=True)
        await writer.end(pending + error_event(err, usage), close=True)
        return
    except BaseException:
        resp.close()
        raise
    finally:
        gw.metrics.streams.dec()
    last = pending + DONE_EVENT
    if req.include_usage:
        usage = _usage(req, translator.usage, translator.output_chars, attempt, cut=False)
        last = pending + encoder.usage_event(usage) + DONE_EVENT
    await writer.end(last)


async def _complete(
    gw: Gateway, call: Call, req: ChatRequest, plan: Plan, records: list[AttemptRecord]
) -> None:
    done = await gw.router.complete(req, plan, records)
    attempt, result = done.attempt, done.result
    chars = sum(
        len(c.message.content or "")
        + sum(len(t.function.arguments) for t in c.message.tool_calls or ())
        for c in result.choices
    )
    body = ChatCompletion(
        **msgspec.structs.asdict(_identity(call, attempt, plan)),
        choices=result.choices,
        usage=_usage(req, result.usage, chars, attempt, cut=False),
    )
    await call.writer.send(200, [*call.headers, JSON], _ENCODER.encode(body))
