"""``GET`` / ``DELETE /v1/responses/{id}``, ``GET /v1/responses/{id}/input_items`` and
``POST /v1/responses/{id}/cancel``: the caller's stored responses
(:mod:`sluice.frontdoors.responses.memory`) and background ones (:mod:`.background`:
polled while they run, streamed again with ``?stream=true``). Another account's id is
a 404 like a missing one: ownership is part of every lookup."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Literal
from urllib.parse import parse_qsl

import msgspec
from msgspec import Raw

from sluice.errors import ConflictError, InvalidRequestError, NotFoundError
from sluice.exchange.heads import JSON
from sluice.frontdoors.responses.memory import listed_items
from sluice.server.background import Backgrounds, request_id_of
from sluice.server.streams import follow, locate, past
from sluice.storage.responses import StoredResponse

if TYPE_CHECKING:
    from sluice.server.call import Call
    from sluice.server.context import GatewayContext

RESPONSES_PREFIX = "/v1/responses/"
_ITEMS_SUFFIX = "/input_items"
_RESPONSE_ID = re.compile(r"resp_[0-9A-Za-z]{1,64}")
_IGNORED = frozenset({"include", "include[]"})
"""Query parameters OpenAI's SDKs may send that change nothing here."""
_ENCODER = msgspec.json.Encoder()


class _Head(msgspec.Struct):
    status: str
    background: bool = False


_HEAD = msgspec.json.Decoder(_Head)


class Deleted(msgspec.Struct):
    id: str
    object: str = "response.deleted"
    deleted: bool = True


class ItemPage(msgspec.Struct):
    data: list[dict[str, Raw]]
    first_id: str | None
    last_id: str | None
    has_more: bool
    object: Literal["list"] = "list"


async def read(backgrounds: Backgrounds, gw: GatewayContext, call: Call) -> None:
    """``GET /v1/responses/{id}`` (a background one as it stands, or streamed), or its
    ``/input_items`` (paged as OpenAI pages)."""
    assert call.principal is not None
    path = call.request.path[len(RESPONSES_PREFIX) :]
    if path.endswith(_ITEMS_SUFFIX):
        kept = await _stored(gw, call, path[: -len(_ITEMS_SUFFIX)])
        params = _params(call.request.query, ("after", "limit", "order"))
        page = _item_page(listed_items(kept), params)
        await call.writer.send(200, [*call.headers, JSON], _ENCODER.encode(page))
        return
    params = _params(call.request.query, ("stream", "starting_after"))
    if streams_again(call.request.query):
        await _stream_again(backgrounds, gw, call, path, params.get("starting_after"))
        return
    running = backgrounds.running(path, call.principal.account_id)
    if running is not None:
        await call.writer.send(200, [*call.headers, JSON], running.snapshot())
        return
    answer = await _kept_or(gw, call, path, backgrounds.poll_elsewhere)
    await call.writer.send(200, [*call.headers, JSON], answer)


async def cancel(backgrounds: Backgrounds, gw: GatewayContext, call: Call) -> None:
    """``POST /v1/responses/{id}/cancel``: a running background response stopped now
    (charged for what it made); a cancelled one answered again as it is."""
    assert call.principal is not None
    path = call.request.path[len(RESPONSES_PREFIX) :]
    response_id, _, action = path.partition("/")
    if action != "cancel":
        raise NotFoundError(f"Unknown request URL: POST {call.request.path[:120]}.")
    running = backgrounds.running(response_id, call.principal.account_id)
    if running is not None:
        answer = await backgrounds.cancel(running)
    else:
        answer = await _kept_or(gw, call, response_id, backgrounds.cancel_elsewhere)
    head = _HEAD.decode(answer)
    if not head.background:
        raise InvalidRequestError(
            "Only a response created with background: true can be cancelled.",
            code="response_not_cancellable",
        )
    if head.status != "cancelled":
        raise ConflictError(
            f"The response already ended ({head.status}); only a running one can be cancelled.",
            code="response_not_cancellable",
        )
    await call.writer.send(200, [*call.headers, JSON], answer)


async def _stream_again(
    backgrounds: Backgrounds,
    gw: GatewayContext,
    call: Call,
    response_id: str,
    starting_after: str | None,
) -> None:
    """A background response's events from its start, or after sequence number
    ``starting_after``; then its live tail while it runs. 410 once its events are no
    longer kept (its end stays readable whole)."""
    assert call.principal is not None
    relays = backgrounds.relays
    try:
        if not _RESPONSE_ID.fullmatch(response_id):
            raise _not_found(response_id)
        relay = await locate(relays, request_id_of(response_id), call.principal.account_id)
    except NotFoundError:
        await _stored(gw, call, response_id)  # 404 when there is no such response
        raise InvalidRequestError(
            "Only a background response is streamed again; GET this one whole.",
            code="unsupported_parameter",
            param="stream",
        ) from None
    seen = 0
    if starting_after is not None:
        ok = starting_after.isascii() and starting_after.isdigit() and len(starting_after) < 19
        seen = int(starting_after) + 1 if ok else -1
        if seen <= 0 or past(seen, relay):
            raise InvalidRequestError(
                f"starting_after is the sequence number of an event sent (0 to "
                f"{relay.count - 1}), not {starting_after[:40]!r}.",
                code="invalid_value",
                param="starting_after",
            )
    await follow(relays, relay, seen, gw, call)


async def delete(gw: GatewayContext, call: Call) -> None:
    """``DELETE /v1/responses/{id}``: the stored response and its items are gone."""
    assert call.principal is not None
    response_id = call.request.path[len(RESPONSES_PREFIX) :]
    if not _RESPONSE_ID.fullmatch(response_id) or not await gw.memory.forget(
        response_id, call.principal.account_id
    ):
        raise _not_found(response_id)
    await call.writer.send(200, [*call.headers, JSON], _ENCODER.encode(Deleted(response_id)))


async def _stored(gw: GatewayContext, call: Call, response_id: str) -> StoredResponse:
    stored = await _find(gw, call, response_id)
    if stored is None:
        raise _not_found(response_id)
    return stored


async def _kept_or(
    gw: GatewayContext,
    call: Call,
    response_id: str,
    elsewhere: Callable[[str, str], Awaitable[bytes | None]],
) -> bytes:
    """The stored response, else what ``elsewhere`` finds of a background one another
    process runs; 404 when neither has it."""
    assert call.principal is not None
    stored = await _find(gw, call, response_id)
    if stored is not None:
        return bytes(stored.response)
    answer = None
    if _RESPONSE_ID.fullmatch(response_id):
        answer = await elsewhere(response_id, call.principal.account_id)
    if answer is None:
        raise _not_found(response_id)
    return answer


async def _find(gw: GatewayContext, call: Call, response_id: str) -> StoredResponse | None:
    assert call.principal is not None
    if not _RESPONSE_ID.fullmatch(response_id):
        return None
    return await gw.memory.find(response_id, call.principal.account_id)


def _not_found(response_id: str) -> NotFoundError:
    return NotFoundError(
        f"Response with id '{response_id[:80]}' not found.", code="response_not_found"
    )


def streams_again(query: str) -> bool:
    """Does a retrieve's query ask for the response streamed again (``?stream=true``)?
    A malformed one does not (it is refused at once)."""
    try:
        pairs = parse_qsl(query, keep_blank_values=True, max_num_fields=32)
    except ValueError:
        return False
    return any(name == "stream" and value != "false" for name, value in pairs)


def _params(query: str, known: tuple[str, ...]) -> dict[str, str]:
    """The query's parameters (``include`` ignored); 400 for an unknown one."""
    try:
        pairs = parse_qsl(query, keep_blank_values=True, max_num_fields=32)
    except ValueError:
        raise InvalidRequestError("The query string is malformed.") from None
    params: dict[str, str] = {}
    for name, value in pairs:
        if name in _IGNORED:
            continue
        if name not in known:
            raise InvalidRequestError(
                f"Unknown query parameter '{name[:64]}' (known: {', '.join(known)}).",
                code="unknown_parameter",
                param=name[:64],
            )
        params[name] = value
    return params


def _item_page(items: list[dict[str, Raw]], params: dict[str, str]) -> ItemPage:
    """``order`` ``desc`` (the default: newest first) or ``asc``; ``limit`` 1 to 100
    (default 20); ``after``: the items past the one with that id."""
    order = params.get("order", "desc")
    if order not in ("asc", "desc"):
        raise InvalidRequestError("order is 'asc' or 'desc'.", code="invalid_value", param="order")
    text = params.get("limit", "20")
    limit = int(text) if text.isascii() and text.isdigit() and len(text) <= 3 else 0
    if not 1 <= limit <= 100:
        raise InvalidRequestError(
            "limit is a whole number from 1 to 100.", code="invalid_value", param="limit"
        )
    ordered = items[::-1] if order == "desc" else items
    ids = [msgspec.json.decode(item["id"]) for item in ordered]
    start = 0
    if "after" in params:
        if params["after"] not in ids:
            raise InvalidRequestError(
                f"No input item '{params['after'][:80]}' in this response.",
                code="invalid_value",
                param="after",
            )
        start = ids.index(params["after"]) + 1
    data = ordered[start : start + limit]
    shown = ids[start : start + limit]
    return ItemPage(
        data=data,
        first_id=shown[0] if shown else None,
        last_id=shown[-1] if shown else None,
        has_more=start + limit < len(ordered),
    )
