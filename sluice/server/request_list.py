"""``GET /v1/requests`` (an API key: its own account's requests, the account taken from
the key, never from a parameter) and ``GET /admin/requests`` (the admin key: every
account's, ``account=`` to pick one by name).

Newest first by ``(created_at, id)``, a page at a time (:mod:`~sluice.server.pages`);
``format=csv`` or ``format=jsonl`` answers the same page as an export, its next cursor
in the ``x-next-cursor`` header. Rows queued by the write-behind log are written first,
so a listing shows every request that finished before it.

One page reads at most :data:`~sluice.storage.request_log.MAX_EXAMINED` rows of the
log (an account's through indexes led by its id): when the filters matched fewer
rows than asked for by then, the page is short, even empty, ``has_more`` is true and
the cursor resumes after the last row read. The cursor is the same ``[created_at,
id]`` position either way.
"""

from __future__ import annotations

import csv
import io
import re
from typing import TYPE_CHECKING

import msgspec

from sluice.errors import InvalidRequestError
from sluice.exchange.heads import JSON
from sluice.server.admin import authorize
from sluice.server.admin_common import find_account
from sluice.server.pages import (
    CursorInt,
    decode_cursor,
    encode_cursor,
    page_limit,
    query_params,
)
from sluice.storage.base import REQUEST_STATUSES, RequestFilters, RequestRecord

if TYPE_CHECKING:
    from sluice.server.call import Call
    from sluice.server.context import GatewayContext

LIST_PATH = "/v1/requests"
ADMIN_LIST_PATH = "/admin/requests"
CSV_COLUMNS = (
    "id",
    "created_at",
    "account_id",
    "key_id",
    "requested_model",
    "served_model",
    "provider",
    "connection",
    "status",
    "http_status",
    "finish_reason",
    "stream",
    "prompt_tokens",
    "completion_tokens",
    "cached_tokens",
    "reasoning_tokens",
    "cost",
    "duration_ms",
    "ttft_ms",
    "error_type",
    "error_code",
)
"""The CSV export's columns, in this order, whatever the record gains later."""

_TEXT_FILTERS = (("status", "status"), ("model", "model"), ("provider", "provider"))
_PARAMS = ("limit", "cursor", "format", "status", "model", "provider", "key", "since", "until")
_SECONDS = re.compile(r"[0-9]{1,12}")
_MAX_TEXT = 256
_FORMULA = ("=", "+", "-", "@", "\t", "\r")
_ENCODER = msgspec.json.Encoder()
CSV_TYPE = ("content-type", "text/csv; charset=utf-8")
JSONL_TYPE = ("content-type", "application/x-ndjson")


class RequestCursor(msgspec.Struct, array_like=True, forbid_unknown_fields=True):
    """Where a request listing stopped: the last row's ``created_at`` and id (the last
    row shown, or the last one read when the page came up short)."""

    created_at: CursorInt
    id: str


async def own_requests(gw: GatewayContext, call: Call) -> None:
    """``GET /v1/requests``: the calling key's account only."""
    await _send_page(gw, call, *await account_scope(gw, call, _PARAMS, admin=False))


async def all_requests(gw: GatewayContext, call: Call) -> None:
    """``GET /admin/requests``: every account's, or ``account=``'s."""
    await _send_page(gw, call, *await account_scope(gw, call, _PARAMS, admin=True))


async def account_scope(
    gw: GatewayContext, call: Call, allowed: tuple[str, ...], *, admin: bool
) -> tuple[dict[str, str], str | None]:
    """A listing's query parameters and whose rows it reads: the calling API key's
    account (never a parameter), or with the admin key every account's, or those of
    the account named by ``account=``."""
    if not admin:
        assert call.principal is not None
        return query_params(call.request.query, allowed), call.principal.account_id
    authorize(gw, call)
    params = query_params(call.request.query, (*allowed, "account"))
    name = params.get("account")
    return params, None if name is None else (await find_account(gw, name)).id


def request_filters(params: dict[str, str], account_id: str | None) -> RequestFilters:
    """The filters of a listing's query parameters; 400 for a malformed one."""
    text = {field: text_param(params, name) for name, field in _TEXT_FILTERS}
    if text["status"] is not None and text["status"] not in REQUEST_STATUSES:
        raise InvalidRequestError(
            f"status must be one of {', '.join(REQUEST_STATUSES)}.",
            code="invalid_status",
            param="status",
        )
    return RequestFilters(
        account_id=account_id,
        key_id=text_param(params, "key"),
        since=seconds_param(params, "since"),
        until=seconds_param(params, "until"),
        **text,
    )


async def _send_page(
    gw: GatewayContext, call: Call, params: dict[str, str], account_id: str | None
) -> None:
    limit = page_limit(params.get("limit"))
    cursor = params.get("cursor")
    position = None if cursor is None else decode_cursor(cursor, RequestCursor)
    after = None if position is None else (position.created_at, position.id)
    export = export_format(params)
    filters = request_filters(params, account_id)
    await gw.writer.flush_logged()
    page, resume = await gw.store.request_page(filters, limit, after)
    more = resume is not None
    next_cursor = None if resume is None else encode_cursor(RequestCursor(*resume))
    if export == "json":
        doc = {"object": "list", "data": page, "has_more": more, "next_cursor": next_cursor}
        await call.writer.send(200, [*call.headers, JSON], _ENCODER.encode(doc))
        return
    headers = [*call.headers, CSV_TYPE if export == "csv" else JSONL_TYPE]
    if next_cursor is not None:
        headers.append(("x-next-cursor", next_cursor))
    body = csv_text(page).encode() if export == "csv" else jsonl_bytes(page)
    await call.writer.send(200, headers, body)


def export_format(params: dict[str, str]) -> str:
    """``format``: ``json`` (the default), ``csv`` or ``jsonl``."""
    export = params.get("format", "json")
    if export not in ("json", "csv", "jsonl"):
        raise InvalidRequestError(
            "format is json, csv or jsonl.", code="invalid_format", param="format"
        )
    return export


def csv_text(records: list[RequestRecord]) -> str:
    """A header of :data:`CSV_COLUMNS`, then one line per record."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for record in records:
        writer.writerow([csv_cell(getattr(record, column)) for column in CSV_COLUMNS])
    return out.getvalue()


def jsonl_bytes(records: list[RequestRecord]) -> bytes:
    """One record per line, each as ``GET /v1/requests/{id}`` returns it."""
    return b"".join(_ENCODER.encode(record) + b"\n" for record in records)


def csv_cell(value: object) -> str:
    """A CSV cell; text a spreadsheet would run as a formula is quoted with ``'``."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)  # a number, negative or not, stays a number
    text = str(value)
    return "'" + text if text.startswith(_FORMULA) else text


def text_param(params: dict[str, str], name: str) -> str | None:
    value = params.get(name)
    if value is not None and not 0 < len(value) <= _MAX_TEXT:
        raise InvalidRequestError(f"{name} must be 1 to {_MAX_TEXT} characters.", param=name)
    return value


def seconds_param(params: dict[str, str], name: str) -> int | None:
    value = params.get(name)
    if value is not None and not _SECONDS.fullmatch(value):
        raise InvalidRequestError(f"{name} must be Unix seconds (a whole number).", param=name)
    return None if value is None else int(value)
