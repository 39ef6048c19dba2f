"""``GET`` / ``DELETE /v1/responses/{id}`` and ``GET /v1/responses/{id}/input_items``:
the caller's stored responses (:mod:`sluice.frontdoors.responses.memory`). Another
account's id is a 404 like a missing one: ownership is part of every lookup."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Literal
from urllib.parse import parse_qsl

import msgspec
from msgspec import Raw

from sluice.errors import InvalidRequestError, NotFoundError
from sluice.exchange.heads import JSON
from sluice.frontdoors.responses.memory import listed_items
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


async def read(gw: GatewayContext, call: Call) -> None:
    """``GET /v1/responses/{id}``, or its ``/input_items`` (paged as OpenAI pages)."""
    path = call.request.path[len(RESPONSES_PREFIX) :]
    if path.endswith(_ITEMS_SUFFIX):
        stored = await _stored(gw, call, path[: -len(_ITEMS_SUFFIX)])
        params = _params(call.request.query, ("after", "limit", "order"))
        page = _item_page(listed_items(stored), params)
        await call.writer.send(200, [*call.headers, JSON], _ENCODER.encode(page))
        return
    params = _params(call.request.query, ("stream", "starting_after"))
    if params.get("stream", "false") != "false":
        raise InvalidRequestError(
            "Streaming a stored response again is not served; GET it whole.",
            code="unsupported_parameter",
            param="stream",
        )
    stored = await _stored(gw, call, path)
    await call.writer.send(200, [*call.headers, JSON], bytes(stored.response))


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
    assert call.principal is not None
    stored = None
    if _RESPONSE_ID.fullmatch(response_id):
        stored = await gw.memory.find(response_id, call.principal.account_id)
    if stored is None:
        raise _not_found(response_id)
    return stored


def _not_found(response_id: str) -> NotFoundError:
    return NotFoundError(
        f"Response with id '{response_id[:80]}' not found.", code="response_not_found"
    )


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
