"""The response cache's answers in a SQLite file (sluice/storage/sqlite/answers.py),
several store objects on one file as several workers would have: an answer one kept is
found by another, and by the next process; each lives its time to live; the least
recently used go first once ``max_bytes`` is reached, however many fill it at once
(threads here, processes too); a locked or broken file makes a lookup a miss soon and a
put dropped, said once in the log."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from sluice.cache.store import AnswerStore
from sluice.storage.sqlite import answers as sqlite_answers
from sluice.storage.sqlite.answers import (
    MOST_PENDING,
    PAUSE,
    TIMEOUT,
    WRITE_TIMEOUT,
    SqliteAnswers,
)
from tests.cache.test_store import answer, size


class Clock:
    """Wall-clock seconds the test moves; each reading a microsecond later, so uses are
    ordered as they happen."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        self.now += 1e-6
        return self.now


@asynccontextmanager
async def stores(
    path: Path, count: int = 1, max_bytes: int = 100_000, clock: Callable[[], float] = time.time
) -> AsyncIterator[list[AnswerStore]]:
    """``count`` stores on the file at ``path``, started, closed afterwards."""
    kept = [SqliteAnswers(path, max_bytes, clock) for _ in range(count)]
    try:
        for store in kept:
            await store.start()
        yield [AnswerStore(store, 100_000) for store in kept]
    finally:
        for store in kept:
            await store.close()


def sqlite_of(store: AnswerStore) -> SqliteAnswers:
    assert isinstance(store.kept, SqliteAnswers)
    return store.kept


async def settled(*stores: AnswerStore) -> None:
    """Every put and use queued is written."""
    for store in stores:
        flushing = sqlite_of(store)._flushing
        if flushing is not None:
            await flushing


def held(path: Path) -> tuple[int, int, int, int]:
    """What the file holds: answers and their bytes, counted and as ``stock`` says."""
    with sqlite3.connect(path) as db:
        count, total = db.execute(
            "SELECT COUNT(*), COALESCE(SUM(LENGTH(encoded)), 0) FROM answers"
        ).fetchone()
        entries, kept_bytes = db.execute("SELECT entries, bytes FROM stock").fetchone()
    db.close()
    return count, total, entries, kept_bytes


async def test_an_answer_one_worker_kept_is_found_by_another_and_after_a_restart(
    tmp_path: Path,
) -> None:
    path = tmp_path / "answers.db"
    async with stores(path, count=2) as (here, there):
        assert here.put("k", answer("kept"), ttl=60)
        assert await there.get("k") is None  # off the response path: not yet written
        await settled(here)
        assert await there.get("k") == answer("kept")
        assert await there.get("other") is None
        assert (sqlite_of(here).entries, sqlite_of(here).kept_bytes) == (1, size("kept"))
    async with stores(path) as (later,):
        assert (sqlite_of(later).entries, sqlite_of(later).kept_bytes) == (1, size("kept"))
        assert await later.get("k") == answer("kept")


async def test_an_answer_lives_its_ttl_and_then_counts_no_more(tmp_path: Path) -> None:
    clock = Clock()
    async with stores(tmp_path / "answers.db", clock=clock) as (store,):
        store.put("short", answer("a"), ttl=10)
        store.put("long", answer("b"), ttl=60)
        await settled(store)
        clock.now += 9.9
        assert await store.get("short") is not None
        clock.now += 0.1
        assert await store.get("short") is None
        store.put("next", answer("c"), ttl=60)  # a put forgets what expired
        await settled(store)
        kept = sqlite_of(store)
        assert (kept.entries, kept.kept_bytes, kept.evictions) == (2, 2 * size("a"), 0)
    assert held(tmp_path / "answers.db") == (2, 2 * size("a"), 2, 2 * size("a"))


async def test_a_put_replaces_the_answer_its_key_held(tmp_path: Path) -> None:
    async with stores(tmp_path / "answers.db") as (store,):
        store.put("k", answer("first"), ttl=60)
        store.put("k", answer("second answer"), ttl=60)
        await settled(store)
        assert await store.get("k") == answer("second answer")
        assert sqlite_of(store).kept_bytes == size("second answer")


async def test_least_recently_used_answers_go_first(tmp_path: Path) -> None:
    clock = Clock()
    path = tmp_path / "answers.db"
    async with stores(path, count=2, max_bytes=3 * size("a"), clock=clock) as (one, other):
        for name in "abc":
            one.put(name, answer(name), ttl=60)
        await settled(one)
        assert await other.get("a") is not None  # used by the other: b is now the oldest
        await settled(other)
        one.put("d", answer("d"), ttl=60)
        await settled(one)
        assert await other.get("b") is None
        assert all([await other.get(name) is not None for name in "acd"])
        kept = sqlite_of(one)
        assert (kept.entries, kept.kept_bytes, kept.evictions) == (3, 3 * size("a"), 1)


async def test_many_workers_filling_at_once_stay_within_max_bytes(tmp_path: Path) -> None:
    most = 10 * size("a")
    path = tmp_path / "answers.db"
    async with stores(path, count=4, max_bytes=most) as many:
        for n in range(30):
            for i, store in enumerate(many):
                store.put(f"{i}-{n}", answer("a"), ttl=60)
            await asyncio.sleep(0)  # the batches of the four interleave
        await settled(*many)
        assert sum(sqlite_of(s).evictions for s in many) == 4 * 30 - 10
    assert held(path) == (10, most, 10, most)


_FILLER = """
import asyncio, sys, time
from pathlib import Path
from sluice.storage.sqlite.answers import SqliteAnswers

async def fill(path, worker, size, most):
    store = SqliteAnswers(Path(path), most, time.time)
    await store.start()
    for n in range(40):
        store.put(f"{worker}-{n}", b"x" * size, 60)
        await asyncio.sleep(0)
    await store.close()
    print(store.evictions)

asyncio.run(fill(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])))
"""


async def test_processes_filling_at_once_stay_within_max_bytes(tmp_path: Path) -> None:
    path, size_, most = tmp_path / "answers.db", 1000, 15_000
    async with stores(path):  # the schema made once, as the first worker would
        pass
    fillers = [
        await asyncio.create_subprocess_exec(
            sys.executable, "-c", _FILLER, str(path), str(w), str(size_), str(most),
            stdout=subprocess.PIPE,
        )
        for w in range(3)
    ]  # fmt: skip
    evicted = [int((await p.communicate())[0]) for p in fillers]
    assert [p.returncode for p in fillers] == [0, 0, 0]
    assert held(path) == (15, most, 15, most) and sum(evicted) == 3 * 40 - 15


async def test_puts_beyond_those_waiting_are_dropped(tmp_path: Path) -> None:
    async with stores(tmp_path / "answers.db", max_bytes=10**7) as (store,):
        for n in range(MOST_PENDING + 10):
            store.put(str(n), answer("a"), ttl=60)
        await settled(store)
        assert sqlite_of(store).entries == MOST_PENDING
        assert await store.get(str(MOST_PENDING - 1)) is not None
        assert await store.get(str(MOST_PENDING)) is None


def failures(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "while its SQLite file fails" in r.message]


async def test_a_write_lock_held_elsewhere_slows_no_lookup_and_drops_a_put(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Another worker holds the file's write lock: a lookup still reads at once (WAL),
    a put waits its timeout and is dropped, and puts are dropped at once for the pause
    after; the lock gone and the pause over, puts are kept again."""
    path = tmp_path / "answers.db"
    async with stores(path) as (store,):
        store.put("k", answer("a"), ttl=60)
        await settled(store)
        locker = sqlite3.connect(path, isolation_level=None)
        locker.execute("BEGIN IMMEDIATE")
        with caplog.at_level(logging.WARNING, "sluice.storage"):
            started = time.monotonic()
            assert await store.get("k") == answer("a")
            looked_up = time.monotonic() - started
            store.put("dropped", answer("b"), ttl=60)
            await settled(store)  # waited for the write lock, then failed
            waited = time.monotonic() - started - looked_up
            store.put("paused", answer("b"), ttl=60)
            assert not sqlite_of(store)._puts  # dropped at once
        locker.execute("COMMIT")
        locker.close()
        await asyncio.sleep(PAUSE)
        store.put("kept", answer("c"), ttl=60)
        await settled(store)
        found = [await store.get(k) is not None for k in ("dropped", "paused", "kept")]
    assert looked_up < TIMEOUT and WRITE_TIMEOUT * 0.9 <= waited < WRITE_TIMEOUT + 1
    assert found == [False, False, True]
    assert failures(caplog) == [
        "response cache: answers are not kept while its SQLite file fails (database is locked)"
    ]


async def test_a_broken_file_makes_a_lookup_a_miss_and_lookups_pause(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The answers' table gone from under the store: a lookup is a miss, said once; for
    the pause after, lookups are misses without reading (the table back already); after
    it, the answer is found."""
    path = tmp_path / "answers.db"
    async with stores(path) as (store,):
        store.put("k", answer("a"), ttl=60)
        await settled(store)
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("ALTER TABLE answers RENAME TO hidden")
        with caplog.at_level(logging.WARNING, "sluice.storage"):
            assert [await store.get("k") for _ in range(3)] == [None, None, None]
            other.execute("ALTER TABLE hidden RENAME TO answers")
            other.close()
            assert await store.get("k") is None  # paused
        await asyncio.sleep(PAUSE)
        assert await store.get("k") == answer("a")
    assert failures(caplog) == [
        "response cache: answers are not looked up while its SQLite file fails "
        "(no such table: answers)"
    ]


async def test_a_file_that_is_no_database_keeps_nothing_and_fails_no_one(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "answers.db"
    path.write_bytes(b"not a database, " * 512)
    with caplog.at_level(logging.WARNING, "sluice.storage"):
        async with stores(path) as (store,):
            assert store.put("k", answer("a"), ttl=60)  # accepted, never kept
            await settled(store)
            assert await store.get("k") is None
            assert sqlite_of(store).entries == 0
    assert [r.message for r in caplog.records if "no answers are kept" in r.message]
    assert path.read_bytes() == b"not a database, " * 512


async def test_a_lookup_the_file_was_too_busy_to_answer_is_not_taken_for_gone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lookup that met a lock held past its timeout (SQLITE_BUSY) is a miss, and
    ``reachable`` says the file did not answer (a semantic lookup keeps the vector);
    answered again, a miss means gone."""
    busy = sqlite3.OperationalError("database is locked")
    busy.sqlite_errorcode = sqlite3.SQLITE_BUSY

    def locked(*_: object) -> bytes | None:
        raise busy

    path = tmp_path / "answers.db"
    async with stores(path) as (store,):
        store.put("k", answer("a"), ttl=60)
        await settled(store)
        with monkeypatch.context() as patched:
            patched.setattr(sqlite_answers, "_look_up", locked)
            missed = await store.get("k")
            while_busy = store.reachable
        found = await store.get("k")
        gone = await store.get("never kept")
        after = store.reachable
    assert missed is None and not while_busy
    assert found == answer("a") and gone is None and after
