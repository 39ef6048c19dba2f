"""``POST /v1/messages/count_tokens``: how many input tokens a Messages request's prompt
is, before sending it. The model must be one the caller could ask for (404 otherwise,
403 outside the key's allow-list). The count is the serving provider's own where it has
a count endpoint (``"source": "provider"``), else, or when that fails or its connection
is cooling down (the circuit breaker), the gateway's estimate (``"estimate"``, the count
a credit hold starts from).

Counting is free but not unbounded: each call counts against the key's request limit
(as every call does), a provider's count of the same body for the same account and
model is kept for :data:`KEEP_FOR` seconds and answered again without a call, and every
count gets a request-log row (``front_door: "count_tokens"``, ``prompt_tokens`` the
count, ``usage_estimated`` when it is the gateway's).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Final

import msgspec

from sluice.core.connection import Target
from sluice.core.tokens import estimate_prompt_tokens
from sluice.errors import PermissionDeniedError
from sluice.exchange.heads import JSON
from sluice.exchange.record import bounded
from sluice.frontdoors.messages.decode import decode_count_request
from sluice.storage.base import RequestRecord
from sluice.wire.messages import CountTokens

if TYPE_CHECKING:
    from sluice.server.app import Gateway
    from sluice.server.call import Call

COUNT_TOKENS_PATH = "/v1/messages/count_tokens"
KEEP_FOR: Final = 300.0
"""Seconds a provider's count is answered again for the same body."""
_MOST: Final = 10_000
_ENCODER = msgspec.json.Encoder()

CountKey = tuple[str, str, bytes]
"""(account id, model asked for, digest of the body)."""


class CountCache:
    """Providers' counts, kept briefly; owned by the gateway."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._counts: dict[CountKey, tuple[int, Target, float]] = {}

    def get(self, key: CountKey) -> tuple[int, Target] | None:
        found = self._counts.get(key)
        if found is None or found[2] <= self._clock():
            return None
        return found[0], found[1]

    def put(self, key: CountKey, counted: tuple[int, Target]) -> None:
        if len(self._counts) >= _MOST:
            now = self._clock()
            self._counts = {k: v for k, v in self._counts.items() if v[2] > now}
            if len(self._counts) >= _MOST:
                self._counts.clear()
        self._counts[key] = (*counted, self._clock() + KEEP_FOR)


async def count_tokens(gw: Gateway, call: Call) -> None:
    principal = call.principal
    assert principal is not None
    services = gw.services
    body = call.request.body
    req = await gw.decoded(partial(decode_count_request, body, services.max_json_depth), body)
    if not principal.policy.allows(req.model):
        raise PermissionDeniedError(
            f"This API key may not use model '{req.model}'.",
            code="model_not_allowed",
            param="model",
        )
    view = await services.tenants.view(principal.account_id)
    plan = view.planner.plan(req.model, ()).within(principal.policy.allows)  # 404: not its
    key = (principal.account_id, req.model, hashlib.sha256(body).digest())
    counted = gw.counts.get(key)
    if counted is None:
        counted = await services.router.count_tokens(req, plan)
        if counted is not None:
            gw.counts.put(key, counted)
    row = RequestRecord(
        id=call.request_id,
        account_id=principal.account_id,
        key_id=principal.key_id,
        created_at=call.created,
        front_door="count_tokens",
        requested_model=bounded(req.model),
        status="complete",
        http_status=200,
    )
    if counted is None:
        answer = CountTokens(estimate_prompt_tokens(req), "estimate")
        row.usage_estimated = True
    else:
        answer = CountTokens(counted[0], "provider")
        target = counted[1]
        row.served_model, row.provider = target.model_id, target.connection.provider
        row.connection = target.connection.id
    row.prompt_tokens = answer.input_tokens
    row.duration_ms = round((gw.clock() - call.started) * 1000, 3)
    services.log.log(row)
    await call.writer.send(200, [*call.headers, JSON], _ENCODER.encode(answer))
