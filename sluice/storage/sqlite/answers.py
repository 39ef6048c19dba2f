"""The SQLite :class:`~sluice.storage.answers.KeptAnswers`: the response cache's answers
in one file that every worker of a machine shares (``[cache] store = "sqlite"``,
docs/cache.md#the-store), so an answer one worker kept is a hit on the others.

One table holds the answers: key, encoded answer, size, when it expires and when it was
last used (wall-clock seconds: the file outlives the process). A one-row table
``stock`` counts them and their bytes, kept by triggers. The file is in WAL mode.

A lookup is one read by key on a connection and thread of its own: it never waits for a
writer, and for a lock at most :data:`TIMEOUT` seconds. Puts and the uses lookups found
are queued (at most :data:`MOST_PENDING` puts and :data:`MOST_USES` uses; more are
dropped) and written off the response path by one thread, all that is queued in one
``BEGIN IMMEDIATE`` transaction: it marks the uses, forgets the answers that expired,
then for each put drops the least recently used until it fits ``max_bytes``. A
transaction holds the file's write lock, so workers filling at once never overrun the
bound. A SQLite error makes a lookup a miss (and every lookup for :data:`PAUSE` seconds
after), a batch of puts dropped; the log says so once per outage.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path

import msgspec

from sluice.storage.sqlite.connection import SqliteThread

_log = logging.getLogger("sluice.storage")
TIMEOUT = 0.1
"""Seconds a lookup waits for a lock on the file (a put: :data:`WRITE_TIMEOUT`)."""
WRITE_TIMEOUT = 2.0
"""Seconds a batch of puts waits for the write lock another worker holds."""
PAUSE = 1.0
"""Seconds lookups (or puts) are left alone after they failed."""
MOST_PENDING = 64
"""Puts waiting to be written at most; one more is dropped."""
MOST_USES = 1024
"""Uses waiting to be written at most; more are not recorded (their answers age)."""

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS answers (key TEXT PRIMARY KEY, encoded BLOB NOT NULL, "
    "size INTEGER NOT NULL, expires REAL NOT NULL, used REAL NOT NULL)",
    "CREATE INDEX IF NOT EXISTS answers_by_use ON answers (used)",
    "CREATE INDEX IF NOT EXISTS answers_by_expiry ON answers (expires)",
    "CREATE TABLE IF NOT EXISTS stock (one INTEGER PRIMARY KEY CHECK (one = 0), "
    "entries INTEGER NOT NULL, bytes INTEGER NOT NULL)",
    "INSERT OR IGNORE INTO stock VALUES (0, 0, 0)",
    "CREATE TRIGGER IF NOT EXISTS answer_in AFTER INSERT ON answers BEGIN "
    "UPDATE stock SET entries = entries + 1, bytes = bytes + NEW.size; END",
    "CREATE TRIGGER IF NOT EXISTS answer_out AFTER DELETE ON answers BEGIN "
    "UPDATE stock SET entries = entries - 1, bytes = bytes - OLD.size; END",
)
# busy_timeout first: another worker may be putting the file in WAL mode
_WRITER_PRAGMAS = (f"busy_timeout={round(WRITE_TIMEOUT * 1000)}", "journal_mode=WAL")
_READER_PRAGMAS = (f"busy_timeout={round(TIMEOUT * 1000)}", "query_only=ON")


class _Put(msgspec.Struct, frozen=True):
    key: str
    encoded: bytes
    expires: float
    used: float


class _Written(msgspec.Struct, frozen=True):
    entries: int
    kept_bytes: int
    evicted: int


class _Outage:
    """Lookups' or puts' failures: paused after one, said once until they work again."""

    __slots__ = ("_failing", "_what", "paused_until")

    def __init__(self, what: str) -> None:
        self._what = what
        self._failing = False
        self.paused_until = float("-inf")

    def failed(self, now: float, exc: BaseException) -> None:
        self.paused_until = now + PAUSE
        if not self._failing:
            self._failing = True
            _log.warning("response cache: %s while its SQLite file fails (%s)", self._what, exc)

    def recovered(self) -> None:
        if self._failing:
            self._failing = False
            _log.info("response cache: its SQLite file works again (%s)", self._what)


class SqliteAnswers:
    """The answers in the SQLite file at ``path``, opened by :meth:`start` (until then,
    and when it cannot be opened, nothing is kept). ``clock``: wall-clock seconds."""

    def __init__(self, path: Path, max_bytes: int, clock: Callable[[], float]) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self._clock = clock
        self._reader: SqliteThread | None = None
        self._writer: SqliteThread | None = None
        self._puts: list[_Put] = []
        self._uses: dict[str, float] = {}
        self._flushing: asyncio.Task[None] | None = None
        self._lookups = _Outage("answers are not looked up")
        self._keeping = _Outage("answers are not kept")
        self._answered = True
        """The last lookup asked the file and it answered (a miss then means gone)."""
        self.entries = 0
        self.kept_bytes = 0
        self.evictions = 0

    @property
    def kind(self) -> str:
        return "sqlite"

    @property
    def reachable(self) -> bool:
        return self._answered

    async def get(self, key: str) -> bytes | None:
        """The answer under ``key``; None when there is none, or the file fails."""
        reader, now = self._reader, self._clock()
        self._answered = False
        if reader is None or now < self._lookups.paused_until:
            return None
        try:
            encoded = await reader.call(partial(_look_up, reader, key, now))
        except sqlite3.Error as exc:
            if not _busy(exc):  # a lock held past TIMEOUT is this lookup's miss only
                self._lookups.failed(self._clock(), exc)
            return None
        self._answered = True
        self._lookups.recovered()
        noted = key in self._uses or len(self._uses) < MOST_USES
        if encoded is not None and noted and now >= self._keeping.paused_until:
            self._uses[key] = now
            self._write_soon()
        return encoded

    def put(self, key: str, encoded: bytes, ttl: float) -> None:
        """Kept off the response path; dropped when the file fails or too many wait."""
        now = self._clock()
        if self._writer is None or now < self._keeping.paused_until:
            return
        if len(self._puts) >= MOST_PENDING:
            return
        self._puts.append(_Put(key, encoded, now + ttl, now))
        self._write_soon()

    def _write_soon(self) -> None:
        if self._flushing is None or self._flushing.done():
            self._flushing = asyncio.get_running_loop().create_task(self._flush())

    async def _flush(self) -> None:
        """Write what is queued, one transaction per batch, until nothing is."""
        while (self._puts or self._uses) and (writer := self._writer) is not None:
            puts, self._puts = self._puts, []
            uses, self._uses = self._uses, {}
            work = partial(_write, writer, puts, uses, self._clock(), self.max_bytes)
            try:
                written = await writer.call(work)
            except sqlite3.Error as exc:
                self._keeping.failed(self._clock(), exc)
                continue
            self._keeping.recovered()
            self.entries, self.kept_bytes = written.entries, written.kept_bytes
            self.evictions += written.evicted

    async def start(self) -> None:
        """Open the file (made when missing), and read what it holds for ``/metrics``;
        a file that cannot be opened is logged and nothing is kept."""
        writer = SqliteThread("sluice-answers")
        reader = SqliteThread("sluice-answers-read")
        try:
            await asyncio.to_thread(self.path.parent.mkdir, parents=True, exist_ok=True)
            await writer.connect(self.path, _WRITER_PRAGMAS)
            await writer.call(partial(_create, writer))
            await reader.connect(self.path, _READER_PRAGMAS)
            self.entries, self.kept_bytes = await reader.call(partial(_stock, reader))
        except (sqlite3.Error, OSError) as exc:
            _log.warning("response cache: no answers are kept in %s (%s)", self.path, exc)
            await reader.close()
            await writer.close()
            return
        self._reader, self._writer = reader, writer

    async def close(self) -> None:
        """The puts queued are written (a second at most); the file is closed."""
        flushing = self._flushing
        if flushing is not None:
            await asyncio.wait({flushing}, timeout=1.0)
            flushing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await flushing
        threads = (self._reader, self._writer)
        self._reader = self._writer = None
        for thread in threads:
            if thread is not None:
                await thread.close()


def _busy(exc: sqlite3.Error) -> bool:
    """The file was locked (another worker writing), not failing."""
    code = getattr(exc, "sqlite_errorcode", None)
    return code in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


def _create(thread: SqliteThread) -> None:
    db = thread.conn()
    with _transaction(db):
        for statement in _SCHEMA:
            db.execute(statement)


def _stock(thread: SqliteThread) -> tuple[int, int]:
    entries, kept_bytes = thread.conn().execute("SELECT entries, bytes FROM stock").fetchone()
    return int(entries), int(kept_bytes)


def _look_up(thread: SqliteThread, key: str, now: float) -> bytes | None:
    row = (
        thread.conn()
        .execute("SELECT encoded FROM answers WHERE key = ? AND expires > ?", (key, now))
        .fetchone()
    )
    return None if row is None else bytes(row[0])


def _write(
    thread: SqliteThread, puts: list[_Put], uses: dict[str, float], now: float, most: int
) -> _Written:
    """One transaction: the uses marked, the expired forgotten, each put kept."""
    db = thread.conn()
    with _transaction(db):
        db.executemany(
            "UPDATE answers SET used = ? WHERE key = ?", [(t, k) for k, t in uses.items()]
        )
        db.execute("DELETE FROM answers WHERE expires <= ?", (now,))
        evicted = sum(_keep(db, put, most) for put in puts)
        entries, kept_bytes = db.execute("SELECT entries, bytes FROM stock").fetchone()
    return _Written(int(entries), int(kept_bytes), evicted)


def _keep(db: sqlite3.Connection, put: _Put, most: int) -> int:
    """Keep ``put`` (replacing its key's answer) once the least recently used answers
    have made room; how many were dropped."""
    db.execute("DELETE FROM answers WHERE key = ?", (put.key,))
    size = len(put.encoded)
    if size > most:
        return 0
    (kept_bytes,) = db.execute("SELECT bytes FROM stock").fetchone()
    over, oldest = kept_bytes + size - most, []
    if over > 0:
        rows = db.execute("SELECT key, size FROM answers ORDER BY used, rowid")
        for key, held in rows:
            oldest.append((key,))
            over -= held
            if over <= 0:
                break
        rows.close()
        db.executemany("DELETE FROM answers WHERE key = ?", oldest)
    db.execute(
        "INSERT INTO answers (key, encoded, size, expires, used) VALUES (?, ?, ?, ?, ?)",
        (put.key, put.encoded, size, put.expires, put.used),
    )
    return len(oldest)


@contextlib.contextmanager
def _transaction(db: sqlite3.Connection) -> Iterator[None]:
    """``BEGIN IMMEDIATE`` (the file's write lock, waited for), committed, or rolled
    back when a statement or the commit failed (unless SQLite already did)."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
