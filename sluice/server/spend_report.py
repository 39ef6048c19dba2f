"""``GET /v1/spend`` (an API key: its own account's spend, the account taken from the
key) and ``GET /admin/spend`` (the admin key: every account's, ``account=`` for one).

``by=key|model|provider|day`` groups the ledger's charges (:mod:`~sluice.storage.spend`)
over ``since``/``until`` (Unix seconds), filtered by ``key``, ``model``, ``provider``.
Groups come a page at a time in order of their value; ``total`` is always the whole
range's. ``format=csv|jsonl`` exports the page's groups (the next cursor and the total
in headers). Charges queued by the write-behind queue are written first.
"""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import msgspec

from sluice.core.money import usd_from_nano
from sluice.errors import InvalidRequestError
from sluice.exchange.heads import JSON
from sluice.server.pages import CursorInt, decode_cursor, encode_cursor, page_limit
from sluice.server.request_list import (
    CSV_TYPE,
    JSONL_TYPE,
    account_scope,
    csv_cell,
    export_format,
    seconds_param,
    text_param,
)
from sluice.storage.spend import (
    DAY_SECONDS,
    SPEND_BY,
    SpendBy,
    SpendFilters,
    SpendGroup,
    SpendTotal,
)

if TYPE_CHECKING:
    from sluice.server.call import Call
    from sluice.server.context import GatewayContext

SPEND_PATH = "/v1/spend"
ADMIN_SPEND_PATH = "/admin/spend"
_PARAMS = ("by", "limit", "cursor", "format", "key", "model", "provider", "since", "until")
_ENCODER = msgspec.json.Encoder()


class SpendCursor(msgspec.Struct, array_like=True, forbid_unknown_fields=True):
    """Where a report's page stopped: its grouping and the last group's value."""

    by: SpendBy
    after: str | CursorInt


async def own_spend(gw: GatewayContext, call: Call) -> None:
    """``GET /v1/spend``: the calling key's account only."""
    await _send_report(gw, call, *await account_scope(gw, call, _PARAMS, admin=False))


async def all_spend(gw: GatewayContext, call: Call) -> None:
    """``GET /admin/spend``: every account's, or ``account=``'s."""
    await _send_report(gw, call, *await account_scope(gw, call, _PARAMS, admin=True))


def spend_by(text: str | None) -> SpendBy:
    for by in SPEND_BY:
        if text == by:
            return by
    raise InvalidRequestError(
        f"by is one of {', '.join(SPEND_BY)}.", code="invalid_spend_by", param="by"
    )


async def _send_report(
    gw: GatewayContext, call: Call, params: dict[str, str], account_id: str | None
) -> None:
    by = spend_by(params.get("by"))
    limit = page_limit(params.get("limit"))
    export = export_format(params)
    cursor = params.get("cursor")
    after = None if cursor is None else decode_cursor(cursor, SpendCursor)
    if after is not None and (after.by != by or isinstance(after.after, int) != (by == "day")):
        raise InvalidRequestError(
            "This cursor is not one this listing gave out.", code="invalid_cursor", param="cursor"
        )
    filters = SpendFilters(
        account_id=account_id,
        key_id=text_param(params, "key"),
        model=text_param(params, "model"),
        provider=text_param(params, "provider"),
        since=seconds_param(params, "since"),
        until=seconds_param(params, "until"),
    )
    await gw.writer.flush_logged()  # a charge is queued with its request's log row
    found, total = await gw.store.spend(
        filters, by, limit + 1, None if after is None else after.after
    )
    page, more = found[:limit], len(found) > limit
    next_cursor = encode_cursor(SpendCursor(by, page[-1].value)) if more else None
    if export == "json":
        doc = report_doc(by, filters, page, total) | {"has_more": more, "next_cursor": next_cursor}
        await call.writer.send(200, [*call.headers, JSON], _ENCODER.encode(doc))
        return
    headers = [*call.headers, CSV_TYPE if export == "csv" else JSONL_TYPE]
    headers += [("x-total-requests", str(total.requests)), ("x-total-spend-nano", str(total.spend))]
    if next_cursor is not None:
        headers.append(("x-next-cursor", next_cursor))
    docs = [group_doc(by, g) for g in page]
    body = spend_csv(by, docs).encode() if export == "csv" else _jsonl(docs)
    await call.writer.send(200, headers, body)


def report_doc(
    by: SpendBy, filters: SpendFilters, groups: list[SpendGroup], total: SpendTotal
) -> dict[str, object]:
    """A report as the API and ``sluice spend --json`` show it."""
    return {
        "object": "spend_report",
        "by": by,
        "since": filters.since,
        "until": filters.until,
        "data": [group_doc(by, g) for g in groups],
        "total": money_doc(total.requests, total.spend),
    }


def group_doc(by: SpendBy, group: SpendGroup) -> dict[str, object]:
    """``{<by>: value, requests, spend (USD), spend_nano}``; a key's also names it, a
    day is ``YYYY-MM-DD`` (UTC), a model or provider the charge did not record is null."""
    value: object = group.value or None
    if by == "day":
        value = day_text(int(group.value))
    doc: dict[str, object] = {by: value}
    if by == "key":
        doc |= {"prefix": group.prefix, "label": group.label}
    return doc | money_doc(group.requests, group.spend)


def money_doc(requests: int, spend: int) -> dict[str, object]:
    return {"requests": requests, "spend": usd_from_nano(spend), "spend_nano": spend}


def day_text(day: int) -> str:
    return datetime.fromtimestamp(day * DAY_SECONDS, UTC).strftime("%Y-%m-%d")


def spend_csv(by: SpendBy, docs: list[dict[str, object]]) -> str:
    columns = [by, *(("prefix", "label") if by == "key" else ()), "requests", "spend", "spend_nano"]
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    for doc in docs:
        writer.writerow([csv_cell(doc[column]) for column in columns])
    return out.getvalue()


def _jsonl(docs: list[dict[str, object]]) -> bytes:
    return b"".join(_ENCODER.encode(doc) + b"\n" for doc in docs)
