"""Cursor pagination for admin listings: ``?limit=&cursor=`` in, a page and the cursor
of the next one out.

A cursor is opaque to clients: base64url of a small JSON position (the last row's
sort key), decoded strictly, so a cursor that was not ours is a 400, never a page
from somewhere else. Order is by a unique key, so pages neither skip nor repeat a row
when rows are added between requests.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Awaitable, Callable
from typing import Annotated, TypeVar
from urllib.parse import parse_qsl

import msgspec

from sluice.errors import InvalidRequestError
from sluice.storage.base import Account, Store

DEFAULT_LIMIT = 50
MAX_LIMIT = 500
_LIMIT = re.compile(r"[0-9]{1,4}")
_MAX_PARAMS = 16
_P = TypeVar("_P", bound=msgspec.Struct)
CursorInt = Annotated[int, msgspec.Meta(ge=0, le=2**53)]
"""A time in a cursor (Unix seconds): what a store can be asked about, nothing past it."""


class AccountPosition(msgspec.Struct, forbid_unknown_fields=True):
    """Where an accounts listing stopped: the last account id shown."""

    after: str


def query_params(query: str, allowed: tuple[str, ...]) -> dict[str, str]:
    """The query string's parameters; 400 for an unknown, repeated or malformed one."""
    try:
        pairs = parse_qsl(
            query, keep_blank_values=True, strict_parsing=bool(query), max_num_fields=_MAX_PARAMS
        )
    except ValueError:
        raise InvalidRequestError("The query string is malformed.") from None
    params: dict[str, str] = {}
    for name, value in pairs:
        if name not in allowed:
            raise InvalidRequestError(
                f"Unknown query parameter '{name}' (known: {', '.join(allowed)}).", param=name
            )
        if name in params:
            raise InvalidRequestError(f"'{name}' is given twice.", param=name)
        params[name] = value
    return params


def page_limit(text: str | None) -> int:
    """``limit``: 1 to :data:`MAX_LIMIT`, :data:`DEFAULT_LIMIT` when absent."""
    if text is None:
        return DEFAULT_LIMIT
    if not _LIMIT.fullmatch(text) or not 1 <= int(text) <= MAX_LIMIT:
        raise InvalidRequestError(
            f"limit must be a whole number from 1 to {MAX_LIMIT}.",
            code="invalid_limit",
            param="limit",
        )
    return int(text)


def encode_cursor(position: msgspec.Struct) -> str:
    return base64.urlsafe_b64encode(msgspec.json.encode(position)).rstrip(b"=").decode("ascii")


def decode_cursor(text: str, kind: type[_P]) -> _P:
    """The position a cursor of :func:`encode_cursor` holds, exactly as it encoded it;
    400 for anything else."""
    try:
        raw = base64.b64decode(text + "=" * (-len(text) % 4), altchars=b"-_", validate=True)
        position = msgspec.json.decode(raw, type=kind)
    except (binascii.Error, ValueError, msgspec.DecodeError):
        position = None
    if position is None or encode_cursor(position) != text:
        raise InvalidRequestError(
            "This cursor is not one this listing gave out.", code="invalid_cursor", param="cursor"
        )
    return position


async def account_page(
    store: Store, query: str, render: Callable[[Account], Awaitable[dict[str, object]]]
) -> dict[str, object]:
    """``GET /admin/accounts``: a page of accounts in account-id order."""
    params = query_params(query, ("limit", "cursor"))
    limit = page_limit(params.get("limit"))
    cursor = params.get("cursor")
    after = None if cursor is None else decode_cursor(cursor, AccountPosition).after
    found = await store.list_accounts(limit + 1, after)
    page = found[:limit]
    more = len(found) > limit
    return {
        "object": "list",
        "data": [await render(account) for account in page],
        "has_more": more,
        "next_cursor": encode_cursor(AccountPosition(page[-1].id)) if more else None,
    }
