"""One tenant's listing never reads another's rows, and no page reads unbounded rows
(issue 20), on both backends (the store fixture)."""

from __future__ import annotations

import pytest

from sluice.storage.base import RequestFilters, RequestPosition, RequestRecord, Store
from sluice.storage.dialect import POSTGRES, SQLITE
from sluice.storage.postgres import PostgresStore
from sluice.storage.request_query import page_query
from sluice.storage.sqlite import SqliteStore

FIELDS = {
    "key_id": "key",
    "status": "status",
    "provider": "provider",
    "requested_model": "requested",
    "served_model": "served",
}
FIELDS_OF = ("key_id", "status", "provider", "model")


def row(n: int, account: str = "acct_a", **fields: object) -> RequestRecord:
    base: dict[str, object] = {
        "id": f"req_{account}_{n:05d}",
        "account_id": account,
        "key_id": f"key_{account}",
        "created_at": 1000 + n // 2,  # two rows share each second
        "requested_model": "test/big" if n % 4 == 0 else "test/small",
        "served_model": "test/small" if n % 4 else "test/served",
        "provider": "anthropic" if n % 5 == 0 else "openai",
        "status": "error" if n % 3 == 0 else "complete",
    }
    return RequestRecord(**{**base, **fields})  # type: ignore[arg-type]


def newest_first(rows: list[RequestRecord]) -> list[RequestRecord]:
    return sorted(rows, key=lambda r: (r.created_at, r.id), reverse=True)


async def index_columns(store: Store) -> dict[str, str]:
    """Each request-log index's name and definition."""
    if isinstance(store, SqliteStore):
        rows = await store.all(
            "SELECT name, sql FROM sqlite_master WHERE type = 'index' "
            "AND tbl_name = 'request_log' AND sql IS NOT NULL"
        )
        return {str(name): str(sql) for name, sql in rows}
    assert isinstance(store, PostgresStore)
    found = await store.pool.fetch(
        "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'request_log'"
    )
    return {str(r[0]): str(r[1]) for r in found}


async def test_each_listing_filter_has_an_index_led_by_the_account(store: Store) -> None:
    """A key's own index serves too: a key belongs to one account."""
    indexes = await index_columns(store)
    second = {  # the column after account_id of each index led by it
        sql.split("(account_id, ", 1)[1].split(", created_at", 1)[0]
        for sql in indexes.values()
        if "(account_id, " in sql
    }
    for field in FIELDS.keys() - {"key_id"}:
        assert [column for column in second if f"{field}'" in column], (field, second)
    assert not [column for column in second if "key_id'" in column], second
    assert "key_id'" in indexes["request_log_key_newest"]


async def test_the_status_indexes_leave_out_the_status_nearly_every_row_has(
    store: Store,
) -> None:
    indexes = await index_columns(store)
    for name in ("request_log_status_newest", "request_log_account_status"):
        where = indexes[name].split(" WHERE ", 1)[1].replace("!=", "<>")
        assert "<> 'complete'" in where and "status'" in where, indexes[name]


async def plan(store: Store, filters: RequestFilters) -> str:
    """The query plan of one page of the listing, as text."""
    if isinstance(store, SqliteStore):
        sql, args = page_query(SQLITE, filters, 50, None, 10_000)
        rows = await store.query(lambda tx: tx.all("EXPLAIN QUERY PLAN " + sql, args))
        return "\n".join(str(r[3]) for r in rows)
    assert isinstance(store, PostgresStore)
    sql, args = page_query(POSTGRES, filters, 50, None, 10_000)
    lines = await store.pool.fetch("EXPLAIN " + sql, *args)
    return "\n".join(str(r[0]) for r in lines)


@pytest.mark.parametrize(
    ("filters", "indexes"),
    [
        (RequestFilters(status="error"), ["request_log_account_status"]),
        (RequestFilters(key_id="key_acct_a"), ["request_log_key_newest"]),
        (RequestFilters(provider="anthropic"), ["request_log_account_provider"]),
        (
            RequestFilters(model="test/big"),
            ["request_log_account_requested", "request_log_account_served"],
        ),
        (RequestFilters(status="error", provider="anthropic"), ["request_log_account_status"]),
    ],
    ids=["status", "key", "provider", "model", "status-and-provider"],
)
async def test_an_accounts_filtered_listing_reads_its_own_index_past_foreign_rows(
    store: Store, filters: RequestFilters, indexes: list[str]
) -> None:
    """The issue's case: a few rows of one account among many of another's with the
    same status; planned on the field's global index, the listing walked them all."""
    foreign = [row(n, "acct_big", status="error", provider="anthropic") for n in range(3000)]
    await store.write_requests(foreign + [row(n) for n in range(3)])
    if isinstance(store, PostgresStore):
        await store.pool.execute("ANALYZE request_log")
    mine = RequestFilters(account_id="acct_a", **{f: getattr(filters, f) for f in FIELDS_OF})
    text = await plan(store, mine)
    for index in indexes:
        assert index in text, text
    records, resume = await store.request_page(mine, 50, None)
    assert {r.account_id for r in records} <= {"acct_a"} and resume is None


async def pages_of(
    store: Store, filters: RequestFilters, limit: int, examine: int
) -> list[tuple[list[RequestRecord], RequestPosition | None]]:
    pages = []
    after: RequestPosition | None = None
    while True:
        records, after = await store.request_page(filters, limit, after, examine)
        pages.append((records, after))
        if after is None:
            return pages
        assert len(pages) < 500


@pytest.mark.parametrize(
    ("filters", "scanned"),
    [
        # status is read from its index; provider is checked on each row read
        (
            RequestFilters(account_id="acct_a", status="error", provider="anthropic"),
            lambda r: r.status == "error",
        ),
        # the requested and the served model's indexes, merged newest first
        (
            RequestFilters(account_id="acct_a", model="test/big", provider="anthropic"),
            lambda r: "test/big" in (r.requested_model, r.served_model),
        ),
        # across accounts: the field's own index
        (RequestFilters(provider="anthropic", status="error"), lambda r: r.status == "error"),
        # the status nearly every row has is left out of its index: the model's are read
        (
            RequestFilters(
                account_id="acct_a", status="complete", model="test/big", provider="anthropic"
            ),
            lambda r: "test/big" in (r.requested_model, r.served_model),
        ),
    ],
    ids=["account-status", "account-model", "every-account", "account-complete"],
)
async def test_a_page_reads_at_most_its_bound_and_paging_on_finds_every_row(
    store: Store, filters: RequestFilters, scanned: object
) -> None:
    rows = [row(n) for n in range(200)] + [row(n, "acct_b") for n in range(60)]
    await store.write_requests(rows)
    mine = [r for r in rows if filters.account_id in (None, r.account_id)]
    read = newest_first([r for r in mine if scanned(r)])  # type: ignore[operator]
    position = [(r.created_at, r.id) for r in read]
    examine, limit = 12, 5
    pages = await pages_of(store, filters, limit, examine)
    every = [r for records, _ in pages for r in records]
    assert every == [
        r for r in read if r.provider == "anthropic" and filters.status in (None, r.status)
    ]
    assert any(len(records) < limit and resume for records, resume in pages)  # came up short
    start = 0
    for records, resume in pages:
        assert len(records) <= limit
        end = len(read) if resume is None else position.index(resume) + 1
        assert end - start <= examine, "a page read past its bound"
        start = end


async def test_a_page_whose_filters_its_index_serves_is_never_cut_short(store: Store) -> None:
    rows = [row(n) for n in range(60)]
    await store.write_requests(rows)
    filters = RequestFilters(account_id="acct_a", status="error")
    pages = await pages_of(store, filters, 7, examine=3)  # the bound is at least a page
    errors = newest_first([r for r in rows if r.status == "error"])
    assert [len(records) for records, _ in pages] == [7, 7, 6]
    assert [r for records, _ in pages for r in records] == errors


async def test_a_short_page_may_be_empty_and_still_say_where_to_resume(store: Store) -> None:
    await store.write_requests([row(n, status="error", provider="openai") for n in range(40)])
    filters = RequestFilters(account_id="acct_a", status="error", provider="gemini")
    pages = await pages_of(store, filters, 5, examine=10)
    assert [records for records, _ in pages] == [[]] * 5
    assert [resume is None for _, resume in pages] == [False] * 4 + [True]
    assert await store.list_requests(filters, 5, None) == []  # the CLI pages on by itself


async def test_a_listing_by_another_accounts_key_finds_none_of_its_rows(store: Store) -> None:
    """The key's own index is read without the account's lead: the account is still
    checked on every row."""
    await store.write_requests([row(n) for n in range(5)] + [row(n, "acct_b") for n in range(5)])
    theirs = RequestFilters(account_id="acct_a", key_id="key_acct_b")
    assert await store.list_requests(theirs, 50, None) == []
    mine = await store.list_requests(
        RequestFilters(account_id="acct_a", key_id="key_acct_a"), 50, None
    )
    assert [r.id for r in mine] == [r.id for r in newest_first([row(n) for n in range(5)])]
