"""The small endpoints: health, model list and lookup, metrics, request log lookup."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable
from typing import TYPE_CHECKING
from urllib.parse import unquote

import msgspec

from sluice.errors import (
    AuthenticationError,
    ModelNotFoundError,
    NotFoundError,
    PermissionDeniedError,
)
from sluice.exchange.heads import JSON
from sluice.server.admin import authorize
from sluice.server.models import MODELS_PREFIX, retrieved
from sluice.server.responses import PROMETHEUS
from sluice.wire.chunks import ModelList

if TYPE_CHECKING:
    from sluice.server.call import Call
    from sluice.server.context import GatewayContext

REQUEST_LOG_PREFIX = "/v1/requests/"
_REQUEST_ID = re.compile(r"req_[0-9A-Za-z]{1,64}")
_ENCODER = msgspec.json.Encoder()
_MODELS = msgspec.json.Decoder(ModelList)
MAX_MODEL_NAME = 512


async def health(gw: GatewayContext, call: Call) -> None:
    """``GET /health`` and ``GET /health/live``: the process answers."""
    await call.writer.send(200, [*call.headers, JSON], b'{"status":"ok"}')


READY_TIMEOUT = 2.0
"""Seconds each dependency has to answer the readiness probe."""


async def ready(gw: GatewayContext, call: Call) -> None:
    """``GET /health/ready``: 200 when storage and the rate limiter answer (and a config
    is loaded: a gateway that serves has one); else 503 naming what failed."""
    checks = {
        "config": "ok",
        "storage": await _probe(gw.store.schema_version()),
        "limits": await _probe(gw.services.limiter.check()),
    }
    failing = sorted(name for name, outcome in checks.items() if outcome != "ok")
    doc = {"status": "not_ready" if failing else "ready", "checks": checks, "failing": failing}
    await call.writer.send(503 if failing else 200, [*call.headers, JSON], _ENCODER.encode(doc))


async def _probe(check: Awaitable[object]) -> str:
    """``ok``, or why not: the failure's type and message (no connection string)."""
    try:
        await asyncio.wait_for(check, READY_TIMEOUT)
    except TimeoutError:
        return f"no answer within {READY_TIMEOUT:g} s"
    except Exception as exc:  # any failure of a dependency is a reason not to be ready
        return f"{type(exc).__name__}: {str(exc)[:200]}"
    return "ok"


async def document(body: bytes, gw: GatewayContext, call: Call) -> None:
    """A fixed JSON document (``/openapi.json``), public."""
    await call.writer.send(200, [*call.headers, JSON], body)


async def models(gw: GatewayContext, call: Call) -> None:
    """``GET /v1/models``: the models and routes this key may ask for (a key with an
    allow-list sees only what it allows)."""
    assert call.principal is not None
    policy, body = call.principal.policy, gw.models_body
    if policy.models is not None:
        listed = _MODELS.decode(body)
        listed.data = [entry for entry in listed.data if policy.allows(entry.id)]
        body = _ENCODER.encode(listed)
    await call.writer.send(200, [*call.headers, JSON], body)


async def model(gw: GatewayContext, call: Call) -> None:
    """``GET /v1/models/{id}`` (the id percent-encoded or not): the model or route as
    the list shows it, also for an alias or a pass-through id; 404 ``model_not_found``
    for a name no request could use, or one the key may not."""
    assert call.principal is not None
    name = unquote(call.request.path[len(MODELS_PREFIX) :])
    entry = None
    if len(name) <= MAX_MODEL_NAME:  # as a request's `model` may be
        entry = retrieved(_MODELS.decode(gw.models_body), gw.tenants.shared.planner, name)
    if entry is None or not call.principal.policy.allows(entry.id):
        raise ModelNotFoundError(
            f"The model '{name[:MAX_MODEL_NAME]}' does not exist or you do not have access to it.",
            param="model",
        )
    await call.writer.send(200, [*call.headers, JSON], _ENCODER.encode(entry))


async def metrics(gw: GatewayContext, call: Call) -> None:
    """``GET /metrics``: for operators, with the admin key (404 while the admin API is
    off); an API key is refused with 403. ``[server] metrics_listen`` serves it keyless."""
    try:
        authorize(gw, call)
    except AuthenticationError:
        if await _is_api_key(gw, call.request.headers.get("authorization")):
            raise PermissionDeniedError(
                "/metrics needs the admin key; an API key cannot read it.",
                code="admin_key_required",
            ) from None
        raise
    services = gw.services
    text = await services.metrics.scrape(gw.store, services.tasks)
    await call.writer.send(200, [*call.headers, PROMETHEUS], text)


async def _is_api_key(gw: GatewayContext, header: str | None) -> bool:
    try:
        await gw.auth.authenticate(header)
    except AuthenticationError:
        return False
    return True


async def request_log(gw: GatewayContext, call: Call) -> None:
    """``GET /v1/requests/{id}``: the caller's own requests only; the ownership check is
    part of the query, so another account's id is indistinguishable from a missing one.
    A request still running answers with its row so far (``status: in_progress``)."""
    assert call.principal is not None
    request_id = call.request.path[len(REQUEST_LOG_PREFIX) :]
    record = None
    if _REQUEST_ID.fullmatch(request_id):
        account_id = call.principal.account_id
        # running first: a request that ends queues its row before it stops running, so
        # it is always one or the other (the other way round, one ending meanwhile was
        # neither: a 404 at the end of a stream)
        live = gw.services.tasks.live(request_id)
        if live is not None:
            record = live if live.account_id == account_id else None
        else:
            await gw.writer.flush_pending(request_id)
            record = await gw.store.get_request(request_id, account_id)
    if record is None:
        raise NotFoundError(
            f"No request '{request_id}' for this account.", code="request_not_found"
        )
    await call.writer.send(200, [*call.headers, JSON], _ENCODER.encode(record))
