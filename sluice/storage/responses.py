"""Stored responses (the Responses API's ``store``): each answer kept with the
conversation items that led to it, owned by one account, for ``[storage]
response_retention``. Both are kept as the JSON the client was answered with, so a
later ``GET`` returns the same bytes and a ``previous_response_id`` continues from
exactly what was said."""

from __future__ import annotations

from typing import Any, Protocol

import msgspec
from msgspec import Raw


class StoredResponse(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    account_id: str
    request_id: str
    """The request that answered it (``GET /v1/requests/{id}``)."""
    created_at: int
    response: Raw
    """The response object, as answered."""
    items: Raw
    """The conversation's input up to this answer, oldest first, as kept: this
    request's ``input`` as sent (a string or items) or, continuing an earlier response,
    the earlier turns' items (with their ids) and outputs, then this input's items."""


COLUMNS = "id, account_id, request_id, created_at, response, items"
"""The ``responses`` table's columns, in the order :func:`stored_from_row` reads."""


class Row(Protocol):
    def __getitem__(self, index: int, /) -> Any: ...


def row_of(r: StoredResponse) -> tuple[str, str, str, int, str, str]:
    """The values of :data:`COLUMNS` for ``r``."""
    items = bytes(r.items).decode()
    return r.id, r.account_id, r.request_id, r.created_at, bytes(r.response).decode(), items


def stored_from_row(row: Row) -> StoredResponse:
    return StoredResponse(
        id=row[0],
        account_id=row[1],
        request_id=row[2],
        created_at=int(row[3]),
        response=Raw(row[4].encode()),
        items=Raw(row[5].encode()),
    )


class ResponseStore(Protocol):
    """The stored responses' role of a store; every lookup is scoped to the account, so
    another account's id is indistinguishable from a missing one."""

    async def save_responses(self, responses: list[StoredResponse]) -> None:
        """Keep each (one already kept under its id has its response and items
        replaced), in one transaction."""
        ...

    async def get_response(self, response_id: str, account_id: str) -> StoredResponse | None: ...

    async def delete_response(self, response_id: str, account_id: str) -> bool: ...

    async def prune_responses(self, before: int, limit: int) -> int:
        """Delete up to ``limit`` responses created before ``before`` (oldest first);
        how many went."""
        ...
