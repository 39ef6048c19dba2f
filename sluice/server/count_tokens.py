"""``POST /v1/messages/count_tokens`` and ``POST /v1/responses/input_tokens``: how many
input tokens a request's prompt is, before sending it (each answered in its wire's
shape). The model must be one the caller could ask for (404 otherwise,
403 outside the key's allow-list). The count is the serving provider's own where it has
a count endpoint (``"source": "provider"``), else, or when that fails or its connection
is cooling down (the circuit breaker), the gateway's estimate (``"estimate"``, the count
a credit hold starts from).

Counting is free but not unbounded: each call counts against the key's request limit
(as every call does), a count of the same body by the same key is kept for
:data:`KEEP_FOR` seconds and answered again without decoding it, and a count gets a
request-log row (``front_door: "count_tokens"``, ``prompt_tokens`` the
count, ``usage_estimated`` when it is the gateway's) when a provider was asked; the
counts answered from the cache or estimated, which cost nothing, one a minute per key
and model, counting the others (``coalesced``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Final, Literal

import msgspec

from sluice.core.connection import Target
from sluice.core.principal import Principal
from sluice.core.tokens import estimate_prompt_tokens
from sluice.errors import PermissionDeniedError
from sluice.exchange.heads import JSON
from sluice.exchange.record import bounded
from sluice.frontdoors.messages.decode import decode_count_request
from sluice.storage.base import RequestRecord
from sluice.wire.chat import ChatRequest
from sluice.wire.messages import CountTokens
from sluice.wire.responses import InputTokens

if TYPE_CHECKING:
    from sluice.server.call import Call
    from sluice.server.context import GatewayContext

COUNT_TOKENS_PATH = "/v1/messages/count_tokens"
INPUT_TOKENS_PATH = "/v1/responses/input_tokens"
KEEP_FOR: Final = 300.0
"""Seconds a provider's count is answered again for the same body."""
_MOST: Final = 10_000
_ENCODER = msgspec.json.Encoder()

CountKey = tuple[str, tuple[str, ...] | None, bytes]
"""(key id, the models it may use, digest of the body): a key whose allow-list changes
is not answered from what it could count before."""


class Counted(msgspec.Struct, frozen=True):
    """One count, as answered: the model asked for, and the target whose provider
    counted (None: the gateway's estimate)."""

    tokens: int
    model: str
    target: Target | None


class CountCache:
    """Counts, kept briefly; owned by the gateway."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._counts: dict[CountKey, tuple[Counted, float]] = {}

    def get(self, key: CountKey) -> Counted | None:
        found = self._counts.get(key)
        if found is None or found[1] <= self._clock():
            return None
        return found[0]

    def put(self, key: CountKey, counted: Counted) -> None:
        if len(self._counts) >= _MOST:
            now = self._clock()
            self._counts = {k: v for k, v in self._counts.items() if v[1] > now}
            if len(self._counts) >= _MOST:
                self._counts.clear()
        self._counts[key] = (counted, self._clock() + KEEP_FOR)


Decode = Callable[[bytes | bytearray, int], ChatRequest]
"""A wire's request body → the prompt to count (the limit is the JSON depth)."""


def messages_count(counted: Counted) -> bytes:
    source: Literal["provider", "estimate"] = "estimate" if counted.target is None else "provider"
    return _ENCODER.encode(CountTokens(counted.tokens, source))


def responses_count(counted: Counted) -> bytes:
    return _ENCODER.encode(InputTokens(counted.tokens))


async def count_tokens(
    counts: CountCache,
    gw: GatewayContext,
    call: Call,
    decode: Decode = decode_count_request,
    answer: Callable[[Counted], bytes] = messages_count,
) -> None:
    principal = call.principal
    assert principal is not None
    body = call.request.body
    key = (principal.key_id, principal.policy.models, hashlib.sha256(body).digest())
    counted = counts.get(key)  # the same body again: not even decoded
    if counted is None:
        counted = await _count(gw, principal, body, decode)
        counts.put(key, counted)
        fresh = counted.target is not None
    else:
        fresh = False
    _log(gw, call, counted, fresh)
    await call.writer.send(200, [*call.headers, JSON], answer(counted))


async def _count(
    gw: GatewayContext, principal: Principal, body: bytes | bytearray, decode: Decode
) -> Counted:
    services = gw.services
    req = await gw.decoded(partial(decode, body, services.max_json_depth), body)
    if not principal.policy.allows(req.model):
        raise PermissionDeniedError(
            f"This API key may not use model '{req.model}'.",
            code="model_not_allowed",
            param="model",
        )
    view = await services.tenants.view(principal.account_id)
    plan = view.planner.plan(req.model, ()).within(principal.policy.allows)  # 404: not its
    found = await services.router.count_tokens(req, plan)
    if found is None:
        return Counted(estimate_prompt_tokens(req), req.model, None)
    return Counted(found[0], req.model, found[1])


def _log(gw: GatewayContext, call: Call, counted: Counted, fresh: bool) -> None:
    """The count's row: whole when a provider was asked; else (an estimate, or the
    cache's answer, free to repeat) one a minute per key and model, counting the others."""
    principal, target = call.principal, counted.target
    assert principal is not None
    row = RequestRecord(
        id=call.request_id,
        account_id=principal.account_id,
        key_id=principal.key_id,
        created_at=call.created,
        front_door="count_tokens",
        requested_model=bounded(counted.model),
        status="complete",
        http_status=200,
        prompt_tokens=counted.tokens,
        usage_estimated=target is None,
        duration_ms=round((gw.clock() - call.started) * 1000, 3),
    )
    if target is not None:
        row.served_model, row.provider = target.model_id, target.connection.provider
        row.connection = target.connection.id
    if fresh:
        gw.services.log.log(row)
    else:
        ident = (principal.key_id, 200, f"count_tokens:{counted.model}")
        gw.services.repeats.log(row, ident)
