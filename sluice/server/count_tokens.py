"""``POST /v1/messages/count_tokens``: how many input tokens a Messages request's prompt
is, before sending it. The model must be one the caller could ask for (404 otherwise,
403 outside the key's allow-list). The count is the serving provider's own where it has
a count endpoint (``"source": "provider"``), else, or when that fails, the gateway's
estimate (``"estimate"``, the count a credit hold starts from)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from sluice.core.tokens import estimate_prompt_tokens
from sluice.errors import PermissionDeniedError
from sluice.exchange.heads import JSON
from sluice.frontdoors.messages.decode import decode_count_request
from sluice.wire.messages import CountTokens

if TYPE_CHECKING:
    from sluice.server.app import Call, Gateway

COUNT_TOKENS_PATH = "/v1/messages/count_tokens"
_ENCODER = msgspec.json.Encoder()


async def count_tokens(gw: Gateway, call: Call) -> None:
    principal = call.principal
    assert principal is not None
    services = gw.services
    req = decode_count_request(call.request.body, services.max_json_depth)
    if not principal.policy.allows(req.model):
        raise PermissionDeniedError(
            f"This API key may not use model '{req.model}'.",
            code="model_not_allowed",
            param="model",
        )
    view = await services.tenants.view(principal.account_id)
    plan = view.planner.plan(req.model, ())  # 404 for a model this caller has not got
    counted = await services.router.count_tokens(req, plan)
    if counted is None:
        answer = CountTokens(estimate_prompt_tokens(req), "estimate")
    else:
        answer = CountTokens(counted, "provider")
    await call.writer.send(200, [*call.headers, JSON], _ENCODER.encode(answer))
