"""The request-log listing's one query, built the same way for both backends: the
filters, newest first by ``(created_at, id)``, resumed after a position.

Every value is a bound parameter; only the fixed field names below reach the SQL text.
"""

from __future__ import annotations

import msgspec

from sluice.storage.base import RequestFilters, RequestPosition


class SqlDialect(msgspec.Struct, frozen=True):
    """How a backend spells a numbered parameter, a text field of the JSON record and
    the record read back as JSON text (``str.format`` templates)."""

    param: str
    field: str
    record: str


SQLITE = SqlDialect("?{}", "json_extract(record, '$.{}')", "record")
POSTGRES = SqlDialect("${}", "(record->>'{}')", "record::text")

_EQUAL_FIELDS = ("key_id", "provider", "status")


def list_requests_query(
    dialect: SqlDialect, filters: RequestFilters, limit: int, after: RequestPosition | None
) -> tuple[str, list[object]]:
    """The ``SELECT`` of :meth:`~sluice.storage.base.Store.list_requests` and its
    arguments."""
    args: list[object] = []

    def arg(value: object) -> str:
        args.append(value)
        return dialect.param.format(len(args))

    where = ["TRUE"]
    if filters.account_id is not None:
        where.append(f"account_id = {arg(filters.account_id)}")
    for name in _EQUAL_FIELDS:
        value = getattr(filters, name)
        if value is not None:
            where.append(f"{dialect.field.format(name)} = {arg(value)}")
    if filters.model is not None:
        model = arg(filters.model)
        requested, served = (dialect.field.format(f) for f in ("requested_model", "served_model"))
        where.append(f"({requested} = {model} OR {served} = {model})")
    if filters.since is not None:
        where.append(f"created_at >= {arg(filters.since)}")
    if filters.until is not None:
        where.append(f"created_at < {arg(filters.until)}")
    if after is not None:
        where.append(f"(created_at, id) < ({arg(after[0])}, {arg(after[1])})")
    sql = (
        f"SELECT {dialect.record} FROM request_log WHERE {' AND '.join(where)} "
        f"ORDER BY created_at DESC, id DESC LIMIT {arg(limit)}"
    )
    return sql, args
