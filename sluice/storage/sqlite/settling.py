"""A batch of settlements on SQLite in a fixed number of statements, whatever its size.

Python's sqlite3 lets go of the GIL around every step of a statement and takes it back
after; while the event loop is busy, taking it back waits for the loop to let go. A
statement per settlement row (four per request, and one per request-log row) made the
writing thread fall ever further behind under load: 1,944 of 2,396 charges told to
clients were still unwritten 1.5 s into a steady load (``bench/resilience``'s "SIGKILL
under load" row). Here rows go in a few multi-row statements (64 rows at most, in
power-of-two sizes, so a handful of statement texts serve every batch size):
settlements to a temporary table from which set-based statements do what the
row-by-row code did, with the same guards (a request charged once, a stored hold
released once, a reservation drawn from only while it is open), and the request log
once its batches show the writer behind.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import msgspec

from sluice.storage.base import RequestRecord, Settlement
from sluice.storage.sqlite.connection import Tx

_ENCODER: Final = msgspec.json.Encoder()

_FIELDS: Final = (
    "hold_id",
    "account_id",
    "key_id",
    "request_id",
    "charge",
    "now",
    "model",
    "provider",
    "reservation",
    "held",
    "held_at",
)

_PREPARE: Final = (
    "CREATE TEMP TABLE IF NOT EXISTS settling (seq INTEGER PRIMARY KEY, "
    + ", ".join(_FIELDS)
    + ", fresh INTEGER NOT NULL DEFAULT 0, drawn INTEGER NOT NULL DEFAULT 0, "
    "open INTEGER NOT NULL DEFAULT 0, released INTEGER NOT NULL DEFAULT 0)",
    "CREATE INDEX IF NOT EXISTS temp.settling_request ON settling(request_id)",
    "DELETE FROM settling",
)

_LOAD: Final = f"INSERT INTO settling (seq, {', '.join(_FIELDS)}) VALUES "
_MOST: Final = 64
_CATCH_UP: Final = 128
"""Request-log rows in one batch from which they go in multi-row statements."""

_SETTLE: Final = (
    # the first settlement of each request not charged before
    "UPDATE settling SET fresh = 1 "
    "WHERE seq = (SELECT MIN(seq) FROM settling s WHERE s.request_id = settling.request_id) "
    "AND NOT EXISTS (SELECT 1 FROM ledger "
    "  WHERE ledger.request_id = settling.request_id AND ledger.kind = 'charge')",
    "INSERT INTO ledger (account_id, key_id, request_id, kind, amount, created_at, model, "
    "provider) SELECT account_id, key_id, request_id, 'charge', -charge, now, model, provider "
    "FROM settling WHERE fresh ORDER BY seq",
    # holds decided in memory: written closed, charged from their reservation while open
    "UPDATE settling SET drawn = 1 WHERE fresh AND reservation IS NOT NULL AND EXISTS "
    "(SELECT 1 FROM holds WHERE holds.id = settling.reservation AND released_at IS NULL)",
    "INSERT INTO holds (id, account_id, key_id, request_id, amount, created_at, expires_at, "
    "released_at, charged) SELECT hold_id, account_id, key_id, request_id, held, held_at, "
    "now, now, charge FROM settling WHERE fresh AND reservation IS NOT NULL ORDER BY seq",
    "UPDATE holds SET amount = amount - "
    "(SELECT SUM(charge) FROM settling WHERE drawn AND reservation = holds.id) "
    "WHERE released_at IS NULL AND id IN (SELECT reservation FROM settling WHERE drawn)",
    # stored holds: released once (an expired one was released by the reclaim)
    "UPDATE settling SET open = 1, released = (SELECT amount FROM holds "
    "  WHERE holds.id = settling.hold_id AND released_at IS NULL) "
    "WHERE fresh AND reservation IS NULL AND EXISTS (SELECT 1 FROM holds "
    "  WHERE holds.id = settling.hold_id AND released_at IS NULL)",
    "UPDATE holds SET "
    "released_at = (SELECT now FROM settling WHERE open AND hold_id = holds.id), "
    "charged = (SELECT charge FROM settling WHERE open AND hold_id = holds.id) "
    "WHERE id IN (SELECT hold_id FROM settling WHERE open)",
    "UPDATE accounts SET "
    "balance = balance - (SELECT SUM(charge) FROM settling WHERE fresh "
    "  AND settling.account_id = accounts.id), "
    "held = held - (SELECT SUM(CASE WHEN open THEN released WHEN drawn THEN charge ELSE 0 END) "
    "  FROM settling WHERE fresh AND settling.account_id = accounts.id) "
    "WHERE id IN (SELECT account_id FROM settling WHERE fresh)",
)

_LOG: Final = "INSERT OR REPLACE INTO request_log (id, account_id, created_at, record) VALUES "


def _insert_all(tx: Tx, head: str, rows: Sequence[tuple[object, ...]]) -> None:
    """``head`` + ``VALUES`` for every row: one statement per 64 rows, the rest in
    power-of-two sizes (at most seven statement texts per ``head``)."""
    marks = "(" + ", ".join("?" * len(rows[0])) + ")" if rows else ""
    start = 0
    while start < len(rows):
        size = min(_MOST, 1 << ((len(rows) - start).bit_length() - 1))
        chunk = rows[start : start + size]
        tx.execute(head + ", ".join([marks] * size), [v for row in chunk for v in row])
        start += size


def settle(tx: Tx, settlements: list[Settlement]) -> None:
    """Charge each request once, release or draw its hold (in the caller's transaction)."""
    for statement in _PREPARE:
        tx.execute(statement)
    rows = [(n, *(getattr(s, name) for name in _FIELDS)) for n, s in enumerate(settlements)]
    _insert_all(tx, _LOAD, rows)
    for statement in _SETTLE:
        tx.execute(statement)


def log(tx: Tx, records: list[RequestRecord]) -> None:
    """Request-log rows (a row that exists is replaced): a step each while the batches
    are small, multi-row statements once they grow (the writer is behind). A row costs
    more CPU in a multi-row statement (108 against 77 us in batches of 20, 67 against
    50 in batches of 100: ``bench/request_log_write.py``), but a step each is a GIL
    handoff each, and a writer behind a busy event loop never caught up that way."""
    rows = [(r.id, r.account_id, r.created_at, _ENCODER.encode(r).decode()) for r in records]
    if len(rows) < _CATCH_UP:
        tx.many(_LOG + "(?, ?, ?, ?)", rows)
    else:
        _insert_all(tx, _LOG, rows)
