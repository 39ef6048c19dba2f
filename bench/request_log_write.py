"""What writing the request log costs the gateway's process on SQLite: CPU seconds per
row through ``Store.write_requests``, in batches as the write-behind sends them.

    .venv/bin/python -m bench.request_log_write [--rows 20000] [--batch 20]
        [--accounts 50] [--keys 200] [--per-second 2000]

A fresh store in a temporary directory, opened and migrated by the project's factory
(the real schema and indexes), rows shaped like a metered streamed request's: random
request ids as the gateway draws them, ``--per-second`` rows to each second of
``created_at`` (a whole second, as the log keeps it), spread over ``--accounts`` and
``--keys``. The spread matters: every listing index is led by an account, a key or a
status, and one tenant's rows all land on the same few index pages. SQLite runs in the
gateway's process (its writing thread), so its CPU is the gateway's: the figure is the
process's CPU time, not the wall clock.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

from sluice.ids import ordered_id
from sluice.storage.base import RequestRecord
from sluice.storage.factory import open_store


class Spread(NamedTuple):
    accounts: int
    keys: int
    per_second: int


def _rows(n: int, start: int, spread: Spread) -> list[RequestRecord]:
    return [
        RequestRecord(
            id=ordered_id("req"), account_id=f"acct_{i % spread.accounts:03d}",
            key_id=f"key_{i % spread.keys}", created_at=1_800_000_000 + i // spread.per_second,
            requested_model="test/gpt-fake", served_model="gpt-fake", provider="conn_fake",
            status="complete", http_status=200,
        )
        for i in range(start, start + n)
    ]  # fmt: skip


async def measure(rows: int, batch: int, spread: Spread) -> float:
    """CPU microseconds per row."""
    with tempfile.TemporaryDirectory() as home:
        store = await open_store(f"sqlite:///{Path(home) / 'sluice.db'}")
        try:
            await store.write_requests(_rows(batch, 0, spread))  # warm
            batches = [_rows(batch, start, spread) for start in range(batch, rows + batch, batch)]
            began = time.process_time()
            for one in batches:
                await store.write_requests(one)
            return (time.process_time() - began) / rows * 1e6
        finally:
            await store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=20)
    parser.add_argument("--accounts", type=int, default=50)
    parser.add_argument("--keys", type=int, default=200)
    parser.add_argument("--per-second", type=int, default=2000)
    args = parser.parse_args()
    spread = Spread(args.accounts, args.keys, args.per_second)
    per_row = asyncio.run(measure(args.rows, args.batch, spread))
    print(
        f"{args.rows} rows in batches of {args.batch}, {spread.accounts} accounts, "
        f"{spread.keys} keys, {spread.per_second} a second: {per_row:.0f} us of CPU per row"
    )


if __name__ == "__main__":
    main()
