"""The request-log row of one exchange, built from its state when it ends; and the row
of a call refused before it was read.

What a client sent is stored bounded (:data:`MAX_CLIENT_TEXT`): a model name or an
error message quoting one is cut, with ``…``, past it.
"""

from __future__ import annotations

from typing import Final

import msgspec

from sluice.core.money import usd_from_nano
from sluice.core.principal import Principal
from sluice.core.usage import TokenUsage
from sluice.errors import ApiError
from sluice.exchange.state import ExchangeState
from sluice.storage.base import RequestRecord

MAX_CLIENT_TEXT: Final = 256
"""Characters of a client's string (a model name, an error quoting one) kept in a row."""


def bounded(text: str | None, limit: int = MAX_CLIENT_TEXT) -> str | None:
    """``text`` cut to ``limit`` characters (the last one ``…``) when longer."""
    if text is None or len(text) <= limit:
        return text
    return text[: limit - 1] + "…"


def refusal_record(
    *,
    request_id: str,
    principal: Principal,
    created: int,
    duration: float,
    front_door: str,
    err: ApiError,
) -> RequestRecord:
    """The row of a call refused before its body was read (no model asked for yet)."""
    return RequestRecord(
        id=request_id,
        account_id=principal.account_id,
        key_id=principal.key_id,
        created_at=created,
        front_door=front_door,
        duration_ms=round(duration * 1000, 3),
        http_status=err.http_status,
        error_type=err.type,
        error_code=err.code,
        error_message=bounded(err.message, 4 * MAX_CLIENT_TEXT),
    )


def request_record(
    state: ExchangeState,
    *,
    http_status: int,
    duration: float,
    tokens: TokenUsage | None,
    charged: int,
    front_door: str,
) -> RequestRecord:
    """``tokens`` and ``charged``: the state's :meth:`~ExchangeState.tokens` and
    :meth:`~ExchangeState.charge`, worked out once by the caller (they also settle)."""
    req, principal = state.req, state.principal
    wire = state.priced(tokens, state.error is not None or not state.completed)
    rec = RequestRecord(
        id=state.request_id,
        account_id=principal.account_id,
        key_id=principal.key_id,
        created_at=state.created,
        front_door=front_door,
        requested_model=bounded(req.model),
        stream=req.is_stream,
        attempts=[msgspec.to_builtins(a) for a in state.attempts],
        status=state.status(),
        finish_reason=state.finish_reason(),
        duration_ms=round(duration * 1000, 3),
        http_status=http_status,
        tool_calls=state.tool_calls(),
        disconnect=state.disconnect,
        guardrails=[msgspec.to_builtins(n) for n in state.guardrails],
        repairs=[msgspec.to_builtins(r) for r in state.repairs()],
        stored_response=state.stored,
        omitted_tools=state.omitted_tools,
    )
    if state.plan is not None:
        rec.route_name = state.plan.route_name
    if state.cache is not None:
        rec.cache, source = state.cache.outcome, state.cache.filled_by
        if source is not None and source[1] == state.principal.account_id:
            rec.cache_filled_by = source[0]  # another account's request stays unseen
        probe = state.cache.probe
        if probe is not None:
            rec.cache_similarity, rec.cache_embedding_ms = probe.similarity, probe.embedding_ms
    served = state.attempt
    if served is not None:
        conn = served.target.connection
        rec.served_model, rec.route = served.target.model_id, served.position
        rec.provider, rec.connection = conn.provider, conn.id
    if tokens is not None:
        rec.prompt_tokens, rec.completion_tokens = tokens.prompt_tokens, tokens.completion_tokens
        rec.cached_tokens, rec.reasoning_tokens = tokens.cached_tokens, tokens.reasoning_tokens
        rec.usage_estimated = tokens.estimated
    if wire is not None:
        rec.cost, rec.price_source = wire.cost, wire.price_source
    if state.ticket is not None:
        rec.credits_held = usd_from_nano(state.ticket.amount)
        rec.credits_charged = usd_from_nano(charged)
    if state.first_token is not None:
        rec.ttft_ms = round(state.first_token * 1000, 3)
        generating = duration - state.first_token  # a whole answer has no generating span
        if req.is_stream and tokens is not None and tokens.completion_tokens and generating > 0:
            rec.tokens_per_second = round(tokens.completion_tokens / generating, 2)
    if state.error is not None:
        rec.error_type, rec.error_code = state.error.type, state.error.code
        rec.error_message = bounded(state.error.message, 4 * MAX_CLIENT_TEXT)
    return rec
