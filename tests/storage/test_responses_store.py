"""Stored responses on both backends (the store fixture): kept byte for byte, owned by
one account (another's lookup and delete find nothing), pruned by age oldest first in
bounded batches, alongside the request log's own pruning."""

from __future__ import annotations

from msgspec import Raw

from sluice.storage.base import Store
from sluice.storage.responses import StoredResponse
from sluice.storage.retention import Pruner, Retention

NOW = 1_800_000_000
DAY = 86_400
BODY = b'{"id":"resp_1","object":"response","output":[],"z":1,"a":"\\u00e9"}'


def stored(n: int, created_at: int = NOW, account: str = "acct_a") -> StoredResponse:
    return StoredResponse(
        id=f"resp_{n}",
        account_id=account,
        request_id=f"req_{n}",
        created_at=created_at,
        response=Raw(BODY),
        items=Raw(b'[{"id":"msg_1_in0","type":"message","role":"user","content":"hi"}]'),
    )


async def test_a_response_is_kept_byte_for_byte_and_replaced_whole(store: Store) -> None:
    await store.save_responses([stored(1)])
    found = await store.get_response("resp_1", "acct_a")
    assert found is not None
    assert bytes(found.response) == BODY  # key order and escapes as answered
    assert bytes(found.items).startswith(b'[{"id":"msg_1_in0"')
    assert (found.request_id, found.created_at) == ("req_1", NOW)
    await store.save_responses([stored(1, created_at=NOW + 5)])
    again = await store.get_response("resp_1", "acct_a")
    assert again is not None and again.created_at == NOW


async def test_another_account_neither_reads_nor_deletes_it(store: Store) -> None:
    await store.save_responses([stored(1)])
    assert await store.get_response("resp_1", "acct_b") is None
    assert await store.delete_response("resp_1", "acct_b") is False
    assert await store.get_response("resp_1", "acct_a") is not None
    assert await store.delete_response("resp_1", "acct_a") is True
    assert await store.get_response("resp_1", "acct_a") is None
    assert await store.delete_response("resp_1", "acct_a") is False


async def test_old_responses_are_pruned_oldest_first_in_batches(store: Store) -> None:
    for n in range(7):
        await store.save_responses([stored(n, created_at=NOW - (10 - n) * DAY)])
    assert await store.prune_responses(NOW - 5 * DAY, 3) == 3  # resp_0..2, the oldest
    assert await store.get_response("resp_2", "acct_a") is None
    assert await store.get_response("resp_3", "acct_a") is not None
    assert await store.prune_responses(NOW - 5 * DAY, 3) == 2  # resp_3, resp_4
    assert await store.prune_responses(NOW - 5 * DAY, 3) == 0
    assert await store.get_response("resp_5", "acct_a") is not None


async def test_the_pruner_holds_responses_to_their_retention(store: Store) -> None:
    for n in range(5):
        await store.save_responses([stored(n, created_at=NOW - n * DAY)])
    retention = Retention(response_max_age=2 * DAY, batch=1)
    pruner = Pruner(store, retention, lambda: NOW)
    steps = [await pruner.step(0.0)]
    while pruner.busy:
        steps.append(await pruner.step(0.0))
    assert steps == [1, 1, 0]  # one per batch: resp_3 and resp_4 are past two days
    kept = [n for n in range(5) if await store.get_response(f"resp_{n}", "acct_a")]
    assert kept == [0, 1, 2]
    assert await pruner.step(30.0) == 0 and pruner.due_in(30.0) == 30.0  # next period
