"""``list_requests`` on both backends (the store fixture): order, cursor, every filter."""

from __future__ import annotations

import pytest

from sluice.storage.base import RequestFilters, RequestPosition, RequestRecord, Store


def record(n: int, account: str = "acct_a", **fields: object) -> RequestRecord:
    base: dict[str, object] = {
        "id": f"req_{n:06d}",
        "account_id": account,
        "key_id": "key_a1" if n % 2 else "key_a2",
        "created_at": 1000 + n // 3,  # three rows share each second
        "requested_model": "test/big" if n % 5 == 0 else "test/small",
        "served_model": "test/small",
        "provider": "openai" if n % 3 else "anthropic",
        "status": "error" if n % 7 == 0 else "ok",
    }
    return RequestRecord(**{**base, **fields})  # type: ignore[arg-type]


ROWS = [record(n) for n in range(150)]


async def all_pages(store: Store, filters: RequestFilters, limit: int) -> list[list[str]]:
    pages: list[list[str]] = []
    after: RequestPosition | None = None
    while True:
        found = await store.list_requests(filters, limit, after)
        pages.append([r.id for r in found])
        if len(found) < limit:
            return pages
        after = (found[-1].created_at, found[-1].id)


def newest_first(rows: list[RequestRecord]) -> list[str]:
    return [r.id for r in sorted(rows, key=lambda r: (r.created_at, r.id), reverse=True)]


async def test_pages_list_each_row_once_newest_first(store: Store) -> None:
    await store.write_requests(ROWS)
    pages = await all_pages(store, RequestFilters(account_id="acct_a"), 40)
    ids = [i for page in pages for i in page]
    assert [len(p) for p in pages] == [40, 40, 40, 30]
    assert ids == newest_first(ROWS) and len(set(ids)) == 150


@pytest.mark.parametrize(
    ("filters", "keep"),
    [
        (RequestFilters(key_id="key_a1"), lambda r: r.key_id == "key_a1"),
        (RequestFilters(model="test/big"), lambda r: r.requested_model == "test/big"),
        (RequestFilters(model="test/small"), lambda r: True),  # served, if not requested
        (RequestFilters(provider="anthropic"), lambda r: r.provider == "anthropic"),
        (RequestFilters(status="error"), lambda r: r.status == "error"),
        (RequestFilters(since=1010), lambda r: r.created_at >= 1010),
        (RequestFilters(until=1010), lambda r: r.created_at < 1010),
        (
            RequestFilters(since=1005, until=1020, status="ok", provider="openai"),
            lambda r: 1005 <= r.created_at < 1020 and r.status == "ok" and r.provider == "openai",
        ),
        (RequestFilters(model="test/none"), lambda r: False),
    ],
    ids=[
        "key",
        "requested-model",
        "served-model",
        "provider",
        "status",
        "since",
        "until",
        "combined",
        "no-match",
    ],
)
async def test_each_filter_keeps_exactly_its_rows(
    store: Store, filters: RequestFilters, keep: object
) -> None:
    await store.write_requests(ROWS)
    pages = await all_pages(store, filters, 17)
    assert [i for page in pages for i in page] == newest_first(
        [r for r in ROWS if keep(r)]  # type: ignore[operator]
    )


async def test_an_account_filter_never_returns_another_accounts_rows(store: Store) -> None:
    theirs = [record(n, "acct_b", id=f"req_b{n:05d}") for n in range(30)]
    await store.write_requests(ROWS + theirs)
    mine = await all_pages(store, RequestFilters(account_id="acct_b"), 7)
    assert [i for page in mine for i in page] == newest_first(theirs)
    everyone = await store.list_requests(RequestFilters(), 500, None)
    assert [r.id for r in everyone] == newest_first(ROWS + theirs)
    # a position taken from acct_a's listing only resumes acct_b's own rows
    a_page = await store.list_requests(RequestFilters(account_id="acct_a"), 5, None)
    after = (a_page[-1].created_at, a_page[-1].id)
    resumed = await store.list_requests(RequestFilters(account_id="acct_b"), 500, after)
    assert {r.account_id for r in resumed} == {"acct_b"}


async def test_values_are_bound_never_spliced(store: Store) -> None:
    await store.write_requests(ROWS[:3])
    sneaky = RequestFilters(status="ok' OR '1'='1", model="x') OR (1=1")
    assert await store.list_requests(sneaky, 10, None) == []
    assert len(await store.list_requests(RequestFilters(), 10, None)) == 3


@pytest.mark.parametrize("batch", [150, 5])  # SQLite: multi-row statements, a step each
async def test_a_row_written_again_is_replaced(store: Store, batch: int) -> None:
    await store.write_requests(ROWS[:batch])
    again = [record(n, status="late") for n in range(batch)]
    await store.write_requests(again)
    found = await store.list_requests(RequestFilters(account_id="acct_a"), 500, None)
    assert [r.id for r in found] == newest_first(again)
    assert {r.status for r in found} == {"late"}
