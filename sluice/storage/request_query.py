"""The request-log listing's one query, built the same way for both backends.

A page reads one index range, newest first by ``(created_at, id)``: the index its
filters lead to (an account's own, led by ``account_id``, whenever the listing is
one account's, so it never reads another tenant's rows; a key's own index holds one
account's rows already), narrowed by ``since``,
``until`` and the position to resume after. Those rows, at most ``examine`` of them,
are *examined*; the filters the index did not serve are applied to them, and the page
is the newest ``limit + 1`` that pass. A trailing row says how many were examined and
the last one, so a page that comes up short because the bound was reached still has a
position to resume from. A ``model`` filter reads two ranges (the requested and the
served model's index, at most ``examine`` rows each) and examines the newest
``examine`` of their union.

Every value is a bound parameter; only the fixed field and index names below reach
the SQL text.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final, NamedTuple

import msgspec

from sluice.storage.base import RequestFilters, RequestPosition, RequestRecord
from sluice.storage.dialect import Params, SqlDialect

_NEWEST: Final = "ORDER BY created_at DESC, id DESC"
UNINDEXED_STATUS: Final = "complete"
"""The status nearly every row has. The status indexes leave it out (their upkeep is
paid on every write); a listing of it reads the log by time, where nearly every row
passes."""
_RECORD: Final = msgspec.json.Decoder(RequestRecord)

Page = tuple[list[RequestRecord], RequestPosition | None]


class _Range(NamedTuple):
    """One field's index range: ``field = value``, through the index named ``short``;
    ``one_account``: a value belongs to one account (its index needs no account lead);
    ``leaves_out``: the value the index leaves out (the range says so, for the
    planner to match the partial index)."""

    field: str
    value: str
    short: str
    one_account: bool = False
    leaves_out: str | None = None


def _lead(filters: RequestFilters) -> tuple[_Range, ...]:
    """The ranges a page reads: the first indexed filter of key, status, model,
    provider (a model filter: the requested and the served model's two); none: the log
    by time."""
    if filters.key_id is not None:
        return (_Range("key_id", filters.key_id, "key", one_account=True),)
    if filters.status is not None and filters.status != UNINDEXED_STATUS:
        return (_Range("status", filters.status, "status", leaves_out=UNINDEXED_STATUS),)
    if filters.model is not None:
        return (
            _Range("requested_model", filters.model, "requested"),
            _Range("served_model", filters.model, "served"),
        )
    if filters.provider is not None:
        return (_Range("provider", filters.provider, "provider"),)
    return ()


def _by_account(filters: RequestFilters, lead: _Range | None) -> bool:
    """Whether a range is read through an index led by the account: one account's
    listing, unless the lead's value belongs to that account alone."""
    return filters.account_id is not None and (lead is None or not lead.one_account)


def _index(filters: RequestFilters, lead: _Range | None) -> str:
    """The index a range is read through: led by the account when :func:`_by_account`."""
    if not _by_account(filters, lead):
        return "request_log_newest" if lead is None else f"request_log_{lead.short}_newest"
    return "request_log_account_newest" if lead is None else f"request_log_account_{lead.short}"


def _range(
    arg: Params, filters: RequestFilters, lead: _Range | None, after: RequestPosition | None
) -> str:
    """One index range: its rows' ``(id, created_at)``, newest first (no ``LIMIT``)."""
    dialect = arg.dialect
    where = []
    if _by_account(filters, lead):
        where.append(f"account_id = {arg(filters.account_id)}")
    if lead is not None:
        where.append(f"{dialect.field.format(lead.field)} = {arg(lead.value)}")
        if lead.leaves_out is not None:  # a fixed name, never a client's value
            where.append(f"{dialect.field.format(lead.field)} <> '{lead.leaves_out}'")
    if filters.since is not None:
        where.append(f"created_at >= {arg(filters.since)}")
    if filters.until is not None:
        where.append(f"created_at < {arg(filters.until)}")
    if after is not None:
        where.append(f"(created_at, id) < ({arg(after[0])}, {arg(after[1])})")
    index = dialect.use_index.format(_index(filters, lead))
    condition = f" WHERE {' AND '.join(where)}" if where else ""
    return f"SELECT id, created_at FROM request_log {index}".rstrip() + f"{condition} {_NEWEST}"


def _examined(
    arg: Params, filters: RequestFilters, after: RequestPosition | None, examine: int
) -> str:
    """The rows a page examines: one range, or the newest of two ranges' union."""
    lead = _lead(filters)
    if len(lead) < 2:
        return f"{_range(arg, filters, lead[0] if lead else None, after)} LIMIT {arg(examine)}"
    parts = [
        f"SELECT * FROM ({_range(arg, filters, one, after)} LIMIT {arg(examine)}) AS r{n}"
        for n, one in enumerate(lead)
    ]
    union = " UNION ".join(parts)
    return f"SELECT id, created_at FROM ({union}) AS u {_NEWEST} LIMIT {arg(examine)}"


def _residual(arg: Params, filters: RequestFilters) -> list[str]:
    """The filters the examined range did not serve, on the record itself (``record``
    is the log's row: the examined rows carry only their position)."""
    field = arg.dialect.field
    lead = _lead(filters)
    served = {one.field for one in lead}
    where = []
    if filters.account_id is not None and not _by_account(filters, lead[0] if lead else None):
        where.append(f"account_id = {arg(filters.account_id)}")
    where += [
        f"{field.format(name)} = {arg(value)}"
        for name in ("key_id", "status", "provider")
        if (value := getattr(filters, name)) is not None and name not in served
    ]
    if filters.model is not None and "requested_model" not in served:
        model = arg(filters.model)
        requested, served_model = field.format("requested_model"), field.format("served_model")
        where.append(f"({requested} = {model} OR {served_model} = {model})")
    return where


def page_query(
    dialect: SqlDialect,
    filters: RequestFilters,
    limit: int,
    after: RequestPosition | None,
    examine: int,
) -> tuple[str, list[object]]:
    """The ``SELECT`` of :meth:`~sluice.storage.base.Store.request_page` and its
    arguments: ``(0, created_at, id, record, NULL)`` for each row of the page (the
    newest ``limit + 1`` that pass), then ``(1, created_at, id, NULL, examined)`` for
    the last row examined, if any."""
    arg = Params(dialect)
    residual = _residual(arg, filters)
    # without residual filters every row examined passes: no need to read past the page
    examined = _examined(arg, filters, after, max(examine, limit + 1) if residual else limit + 1)
    passes = "".join(f" AND {condition}" for condition in residual)
    # CROSS JOIN: the examined rows drive the join (SQLite keeps that order)
    page = (
        f"SELECT 0 AS tail, e.created_at, e.id, {dialect.record}, CAST(NULL AS BIGINT) "
        f"FROM examined e CROSS JOIN request_log r WHERE r.id = e.id{passes} "
        f"ORDER BY e.created_at DESC, e.id DESC LIMIT {arg(limit + 1)}"
    )
    last = (
        "SELECT 1, created_at, id, NULL, (SELECT COUNT(*) FROM examined) "
        "FROM examined ORDER BY created_at, id LIMIT 1"
    )
    sql = (
        f"WITH examined AS ({examined}) SELECT * FROM ({page}) AS page "
        f"UNION ALL SELECT * FROM ({last}) AS last ORDER BY 1, 2 DESC, 3 DESC"
    )
    return sql, arg.values


def page_of(rows: Sequence[Any], limit: int, examine: int) -> Page:
    """The records of :func:`page_query`'s rows and where the next page starts."""
    found = [_RECORD.decode(row[3]) for row in rows if row[0] == 0]
    page = found[:limit]
    if len(found) > limit:
        return page, (page[-1].created_at, page[-1].id)
    last = next((row for row in rows if row[0] == 1), None)
    if last is not None and int(last[4]) >= max(examine, limit + 1):
        return page, (int(last[1]), str(last[2]))
    return page, None


async def all_pages(
    page: Callable[[RequestFilters, int, RequestPosition | None], Awaitable[Page]],
    filters: RequestFilters,
    limit: int,
    after: RequestPosition | None,
) -> list[RequestRecord]:
    """Up to ``limit`` rows that pass ``filters`` after ``after``, however many bounded
    pages that takes (:meth:`~sluice.storage.base.Store.list_requests`)."""
    found: list[RequestRecord] = []
    while len(found) < limit:
        records, after = await page(filters, limit - len(found), after)
        found.extend(records)
        if after is None:
            break
    return found
