"""The answer store in one process's memory: bounded in bytes (least recently used first
out), each answer for its time to live, an answer larger than an entry never kept, what
is kept but is not an answer a miss. The Redis store: tests/storage/test_redis_answers.py."""

from __future__ import annotations

import msgspec

from sluice.cache.store import AnswerStore, CachedAnswer
from sluice.core.usage import TokenUsage
from sluice.wire.chunks import Choice, Delta


def answer(text: str) -> CachedAnswer:
    batch = [[Choice(0, Delta(content=text), None)]]
    return CachedAnswer(
        filled_by="req_1",
        account_id="acct_1",
        served_as=["c", "openai", "http://x", "m", "m"],
        tokens=TokenUsage(prompt_tokens=1, completion_tokens=1),
        finish_reason="stop",
        tool_calls=[],
        batches=[batch],
        offsets=[0.0],
    )


def size(text: str) -> int:
    return len(msgspec.json.encode(answer(text)))


async def test_least_recently_used_answers_go_first() -> None:
    now = [0.0]
    store = AnswerStore.in_memory(3 * size("a"), 10_000, lambda: now[0])
    for name in "abc":
        assert store.put(name, answer(name), ttl=60)
    assert await store.get("a") == answer("a")  # a is used: b is now the least recent
    assert store.put("d", answer("d"), ttl=60)
    assert await store.get("b") is None and await store.get("a") is not None
    kept = store.kept
    assert (kept.entries, kept.evictions, kept.kept_bytes) == (3, 1, 3 * size("a"))


async def test_an_answer_lives_its_ttl() -> None:
    now = [0.0]
    store = AnswerStore.in_memory(10_000, 10_000, lambda: now[0])
    store.put("a", answer("a"), ttl=10)
    now[0] = 9.9
    assert await store.get("a") is not None
    now[0] = 10.0
    assert await store.get("a") is None and store.kept.kept_bytes == 0


def test_an_answer_too_large_is_not_kept() -> None:
    store = AnswerStore.in_memory(10_000, size("a"), lambda: 0.0)
    assert not store.put("long", answer("a" * 100), ttl=10)
    assert store.put("short", answer("a"), ttl=10)
    assert not AnswerStore.in_memory(0, 10_000, lambda: 0.0).put("a", answer("a"), ttl=10)


async def test_what_is_kept_but_is_not_an_answer_is_a_miss() -> None:
    store = AnswerStore.in_memory(10_000, 10_000, lambda: 0.0)
    store.kept.put("a", b'{"written": "by another version"}', ttl=10)
    assert await store.get("a") is None
