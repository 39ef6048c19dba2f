"""Spend reports: the ledger's charges summed by key, model, provider or UTC day.

The ledger is the one source: every metered request's charge is one row carrying its
key and (since schema 8 on SQLite, 7 on PostgreSQL) the model and provider that served
it, so a report adds up to the ledger exactly, by construction. A charge is dated when
it was settled. Groups come in order of their value (a cursor resumes after the last
one shown); the total is over every group the filters keep, whatever the page.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

import msgspec

from sluice.storage.dialect import Params, SqlDialect

SpendBy = Literal["key", "model", "provider", "day"]
SPEND_BY: tuple[SpendBy, ...] = ("key", "model", "provider", "day")
DAY_SECONDS = 86400
_EQUAL = ("account_id", "key_id", "model", "provider")


class SpendFilters(msgspec.Struct, frozen=True, kw_only=True):
    """Which charges a report sums; ``None`` keeps any. ``since`` is inclusive,
    ``until`` exclusive (Unix seconds the charge was settled)."""

    account_id: str | None = None
    key_id: str | None = None
    model: str | None = None
    provider: str | None = None
    since: int | None = None
    until: int | None = None


class SpendGroup(msgspec.Struct, frozen=True):
    """One line of a report: ``value`` is the key id, model, provider (``""`` when the
    charge does not say) or the UTC day number (days since 1970-01-01); ``spend`` is in
    nano-USD. ``prefix`` and ``label`` name a key (``by="key"`` only)."""

    value: str | int
    requests: int
    spend: int
    prefix: str | None = None
    label: str | None = None


class SpendTotal(msgspec.Struct, frozen=True):
    requests: int
    spend: int


SpendAfter = str | int
"""Where a report's page stopped: the last group's value."""


def _group(by: SpendBy) -> str:
    """The SQL of the value a charge is grouped by (never ``NULL``, so a cursor can
    compare it)."""
    if by == "day":
        return f"(l.created_at / {DAY_SECONDS})"
    return f"COALESCE(l.{'key_id' if by == 'key' else by}, '')"


def _charges(dialect: SqlDialect, filters: SpendFilters) -> str:
    """The ledger, read through the index that holds every column a report reads
    (SQLite without statistics would walk another one and visit each row: ~4x slower
    at 100,000 charges, bench/README.md)."""
    index = "ledger_spend_by_account" if filters.account_id is not None else "ledger_spend_by_time"
    return f"ledger l {dialect.use_index.format(index)}".rstrip()


def _where(arg: Params, filters: SpendFilters) -> list[str]:
    where = ["l.kind = 'charge'"]
    for name in _EQUAL:
        value = getattr(filters, name)
        if value is not None:
            where.append(f"l.{name} = {arg(value)}")
    if filters.since is not None:
        where.append(f"l.created_at >= {arg(filters.since)}")
    if filters.until is not None:
        where.append(f"l.created_at < {arg(filters.until)}")
    return where


def spend_groups_query(
    dialect: SqlDialect,
    filters: SpendFilters,
    by: SpendBy,
    limit: int,
    after: SpendAfter | None,
) -> tuple[str, list[object]]:
    """``(value, requests, spend, total requests, total spend, prefix, label)`` rows of
    one page of groups: one scan of the charges, grouped first (a key's names are
    joined to its group, not to each charge), the whole range's total carried on every
    row by a window over the groups, the cursor applied after it."""
    arg = Params(dialect)
    group = _group(by)
    where = _where(arg, filters)
    names, join = "NULL, NULL", ""
    if by == "key":
        names, join = "k.prefix, k.name", " LEFT JOIN api_keys k ON k.id = g.value"
    outer = "" if after is None else f" WHERE g.value > {arg(after)}"
    sql = (
        f"SELECT g.value, g.requests, g.spend, g.all_requests, g.all_spend, {names} FROM "
        f"(SELECT {group} AS value, COUNT(*) AS requests, SUM(-l.amount) AS spend, "
        "SUM(COUNT(*)) OVER () AS all_requests, SUM(SUM(-l.amount)) OVER () AS all_spend "
        f"FROM {_charges(dialect, filters)} WHERE {' AND '.join(where)} GROUP BY {group}) g{join}"
        f"{outer} ORDER BY g.value LIMIT {arg(limit)}"
    )
    return sql, arg.values


def spend_total_query(dialect: SqlDialect, filters: SpendFilters) -> tuple[str, list[object]]:
    """``(requests, spend)`` of every charge the filters keep."""
    arg = Params(dialect)
    where = _where(arg, filters)
    sql = (
        f"SELECT COUNT(*), COALESCE(SUM(-l.amount), 0) FROM {_charges(dialect, filters)} "
        f"WHERE {' AND '.join(where)}"
    )
    return sql, arg.values


def spend_page(
    rows: list[Any], after: SpendAfter | None, limit: int
) -> tuple[list[SpendGroup], SpendTotal | None]:
    """The groups of :func:`spend_groups_query`'s rows and the total they carry; None
    when no row carried it and only :func:`spend_total_query` can tell (a page past
    the last group, or ``limit`` 0). PostgreSQL sums come back as ``Decimal``."""
    groups = [
        SpendGroup(v if isinstance(v, str) else int(v), int(n), int(spend), prefix, label)
        for v, n, spend, _, _, prefix, label in rows
    ]
    if rows:
        return groups, SpendTotal(int(rows[0][3]), int(rows[0][4]))
    return groups, (SpendTotal(0, 0) if after is None and limit > 0 else None)


def spend_total(row: Iterable[Any] | None) -> SpendTotal:
    if row is None:
        return SpendTotal(0, 0)
    requests, spend = row
    return SpendTotal(int(requests), int(spend))
