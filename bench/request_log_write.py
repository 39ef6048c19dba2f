"""What writing the request log costs the gateway's process on SQLite: CPU seconds per
row through ``Store.write_requests``, in batches as the write-behind sends them.

    .venv/bin/python -m bench.request_log_write [--rows 20000] [--batch 20]

A fresh store in a temporary directory, opened and migrated by the project's factory
(the real schema and indexes), rows shaped like a metered streamed request's. SQLite
runs in the gateway's process (its writing thread), so its CPU is the gateway's: the
figure is the process's CPU time, not the wall clock.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from sluice.storage.base import RequestRecord
from sluice.storage.factory import open_store


def _rows(n: int, start: int) -> list[RequestRecord]:
    return [
        RequestRecord(
            id=f"req_{start + i:020d}", account_id=f"acct_{i % 50:03d}", key_id=f"key_{i % 200}",
            created_at=1_800_000_000 + start + i, requested_model="test/gpt-fake",
            served_model="gpt-fake", provider="conn_fake", status="complete", http_status=200,
        )
        for i in range(n)
    ]  # fmt: skip


async def measure(rows: int, batch: int) -> float:
    """CPU microseconds per row."""
    with tempfile.TemporaryDirectory() as home:
        store = await open_store(f"sqlite:///{Path(home) / 'sluice.db'}")
        try:
            await store.write_requests(_rows(batch, -batch))  # warm
            batches = [_rows(batch, start) for start in range(0, rows, batch)]
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
    args = parser.parse_args()
    per_row = asyncio.run(measure(args.rows, args.batch))
    print(f"{args.rows} rows in batches of {args.batch}: {per_row:.0f} us of CPU per row")


if __name__ == "__main__":
    main()
