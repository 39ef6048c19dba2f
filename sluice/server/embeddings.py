"""``POST /v1/embeddings`` (docs/embeddings.md): decoded by its door, then run by an
exchange like every metered call (admit → run → settle), its work the
:class:`~sluice.exchange.embedding.Embed`."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from sluice.exchange.embedding import Embed
from sluice.exchange.exchange import Exchange
from sluice.frontdoors.embeddings import (
    EmbeddingsDoor,
    decode_embedding,
    embed_call,
    embedding_carrier,
)
from sluice.server.call import Call
from sluice.server.doors import refuse_empty_account

if TYPE_CHECKING:
    from sluice.server.context import GatewayContext

EMBEDDINGS_PATH = "/v1/embeddings"


async def embeddings(door: EmbeddingsDoor, gw: GatewayContext, call: Call) -> None:
    services = gw.services
    principal = call.principal
    assert principal is not None
    refuse_empty_account(services, principal)
    body = call.request.body
    req = await gw.decoded(partial(decode_embedding, body, services.max_json_depth), body)
    call.request.body = b""
    work_call = embed_call(req, gw.settings.server.max_embedding_inputs)
    exchange = call.exchange = Exchange(
        services, door, call.writer, call.headers, call.request.headers, counted=True
    )
    await exchange.run(
        embedding_carrier(req, work_call),
        principal,
        work=Embed(work_call, as_base64=req.as_base64),
        request_id=call.request_id,
        created=call.created,
        started=call.started,
    )
