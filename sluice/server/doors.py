"""The front doors' endpoints: a request refused before it is read, or decoded and handed
to an exchange; and the request-log row of a door's call refused before an exchange took
it (coalesced with the refusals like it, :mod:`sluice.exchange.refusals`)."""

from __future__ import annotations

from functools import partial
from types import MappingProxyType
from typing import TYPE_CHECKING

from sluice.core.principal import Principal
from sluice.errors import ApiError, BudgetExceededError
from sluice.exchange.exchange import Exchange
from sluice.exchange.ports import FrontDoor, Remembering
from sluice.exchange.record import refusal_record
from sluice.exchange.refusals import REFUSAL_STATUSES
from sluice.exchange.relay import Relays, Resumption
from sluice.exchange.services import Services
from sluice.exchange.work import chat_work
from sluice.server.call import Call
from sluice.server.count_tokens import COUNT_TOKENS_PATH, INPUT_TOKENS_PATH

if TYPE_CHECKING:
    from sluice.server.background import Backgrounds
    from sluice.server.context import GatewayContext

RESUMABLE_HEADER = "x-sluice-resumable"
"""``true`` asks for a resumable stream on any door (docs/api.md#resumable-streams)."""
OMITTED_TOOLS_HEADER = "x-sluice-omitted-tools"
"""Names the kinds of tool a request offered that no upstream was sent."""
LOGGED = MappingProxyType(
    {
        "/v1/chat/completions": "chat",
        "/v1/messages": "messages",
        "/v1/responses": "responses",
        "/v1/embeddings": "embeddings",
        COUNT_TOKENS_PATH: "count_tokens",
        INPUT_TOKENS_PATH: "count_tokens",
    }
)
"""Paths whose requests get request-log rows, and the front door each row names."""


async def serve_door(
    door: FrontDoor,
    gw: GatewayContext,
    call: Call,
    *,
    relays: Relays,
    memory: Remembering | None = None,
    background: Backgrounds | None = None,
) -> None:
    """A front door's endpoint: decode, then the exchange runs the request (with the
    door's ``memory`` of its answers, if it keeps them; a stream asked for resumable
    kept in ``relays``; a request asked to run in the ``background`` handed to it). The
    call was counted against its request limit when it arrived; an account found empty
    is refused before its body is decoded."""
    services = gw.services  # this request's, to its end, whatever a reload swaps in
    assert call.principal is not None
    refuse_empty_account(services, call.principal)
    body, headers = call.request.body, call.request.headers
    req = await gw.decoded(partial(door.decode, body, headers, services.max_json_depth), body)
    call.request.body = b""  # decoded: the raw bytes need not live as long as the request
    incoming = call.request.headers  # a client's traceparent, when tracing is on
    omitted = door.omitted_tools(req)
    answering = (
        [*call.headers, (OMITTED_TOOLS_HEADER, ", ".join(omitted))] if omitted else call.headers
    )
    if background is not None and background.asked_for(req):
        await background.start(gw, call, req, answering, omitted)
        return
    exchange = call.exchange = Exchange(
        services, door, call.writer, answering, incoming, counted=True, memory=memory
    )
    resume = None
    if req.is_stream and (
        req.asks_resumable
        or call.principal.policy.resumable
        or headers.get(RESUMABLE_HEADER, "").lower() == "true"
    ):
        account_id = call.principal.account_id
        resume = Resumption(relays, call.request_id, account_id, gw.settings.streams)
    await exchange.run(
        req,
        call.principal,
        work=chat_work(req, resume),
        omitted_tools=omitted,
        request_id=call.request_id,
        created=call.created,
        started=call.started,
    )


def refuse_empty_account(services: Services, principal: Principal) -> None:
    """An account found empty is refused before its body is decoded (402)."""
    if services.meter.out_of_credits(principal):
        raise BudgetExceededError(
            "The account has no credits left; add credits to make requests.",
            code="insufficient_credits",
        )


def log_unread_refusal(services: Services, call: Call, err: ApiError, duration: float) -> None:
    """A door's call refused before an exchange took it (past its request limit, out of
    credits): its row in the request log, coalesced with others like it."""
    front_door = LOGGED.get(call.request.path)
    if front_door is None or call.exchange is not None or call.principal is None:
        return
    if err.http_status not in REFUSAL_STATUSES:
        return  # a body that does not decode is the client's bug, not a refusal
    services.metrics.refusal(err.type)
    record = refusal_record(
        request_id=call.request_id,
        principal=call.principal,
        created=call.created,
        duration=duration,
        front_door=front_door,
        err=err,
    )
    services.repeats.log(record)
