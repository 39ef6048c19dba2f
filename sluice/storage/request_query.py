"""The request-log listing's one query, built the same way for both backends: the
filters, newest first by ``(created_at, id)``, resumed after a position.

Every value is a bound parameter; only the fixed field names below reach the SQL text.
"""

from __future__ import annotations

from sluice.storage.base import RequestFilters, RequestPosition
from sluice.storage.dialect import Params, SqlDialect

_EQUAL_FIELDS = ("key_id", "provider", "status")


def list_requests_query(
    dialect: SqlDialect, filters: RequestFilters, limit: int, after: RequestPosition | None
) -> tuple[str, list[object]]:
    """The ``SELECT`` of :meth:`~sluice.storage.base.Store.list_requests` and its
    arguments."""
    arg = Params(dialect)
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
    return sql, arg.values
