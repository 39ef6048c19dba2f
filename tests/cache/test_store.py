"""The process's answer store: bounded in bytes (least recently used first out), each
answer for its time to live, an answer larger than an entry never kept."""

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


def test_least_recently_used_answers_go_first() -> None:
    now = [0.0]
    store = AnswerStore(max_bytes=3 * size("a"), max_entry_bytes=10_000, clock=lambda: now[0])
    for name in "abc":
        assert store.put(name, answer(name), ttl=60)
    assert store.get("a") is not None  # a is used: b is now the least recent
    assert store.put("d", answer("d"), ttl=60)
    assert store.get("b") is None and store.get("a") is not None
    assert len(store) == 3 and store.evictions == 1 and store.bytes == 3 * size("a")


def test_an_answer_lives_its_ttl() -> None:
    now = [0.0]
    store = AnswerStore(max_bytes=10_000, max_entry_bytes=10_000, clock=lambda: now[0])
    store.put("a", answer("a"), ttl=10)
    now[0] = 9.9
    assert store.get("a") is not None
    now[0] = 10.0
    assert store.get("a") is None and store.bytes == 0


def test_an_answer_too_large_is_not_kept() -> None:
    store = AnswerStore(max_bytes=10_000, max_entry_bytes=size("a"), clock=lambda: 0.0)
    assert not store.put("long", answer("a" * 100), ttl=10)
    assert store.put("short", answer("a"), ttl=10)
    assert not AnswerStore(0, 10_000, lambda: 0.0).put("a", answer("a"), ttl=10)
