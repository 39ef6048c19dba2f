"""The owner's cost of mirroring a resumable stream to Redis (docs/api.md#several-replicas),
once another process asked for it: CPU per stream and per event, and the time until
the mirror holds the whole stream.

    .venv/bin/python -m bench.relay_mirror [--streams 2000] [--events 23] [--batches 1]

Each stream's events are stamped into a relay (as the exchange stamps them), split in
``--batches`` batches as the stream's pace would split them (one batch per 20 ms), and
mirrored by :class:`~sluice.storage.redis_mirror.RedisMirror` to the Redis on
127.0.0.1:6379 under a key prefix of its own (deleted at the end). Mirrors run at most
64 at a time, as concurrent streams would.
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid

from redis.asyncio import Redis

from sluice.exchange.relay import Relay
from sluice.storage.redis_mirror import RedisMirror

REDIS = "redis://127.0.0.1:6379/0"
EVENT = b'data: {"id":"chatcmpl-1","choices":[{"index":0,"delta":{"content":"0123456789abcdef"}}]}'


async def _one(share: RedisMirror, n: int, events: int, batches: int) -> None:
    relay = Relay(f"req_bench{n}", "acct", 1 << 24)
    relay.retention = 60.0
    mirrored = share.mirror(relay, relay.retention)
    per = max(1, events // batches)
    for start in range(0, events, per):
        relay.stamp(b"".join(EVENT + b"\n\n" for _ in range(min(per, events - start))))
        await asyncio.sleep(0)
    relay.finish("complete")
    await mirrored


async def main(streams: int, events: int, batches: int) -> None:
    prefix = f"sluice-bench:{uuid.uuid4().hex}:"
    share = RedisMirror.from_url(REDIS, prefix)
    gate = asyncio.Semaphore(64)

    async def guarded(n: int) -> None:
        async with gate:
            await _one(share, n, events, batches)

    cpu, wall = time.process_time(), time.perf_counter()
    await asyncio.gather(*(guarded(n) for n in range(streams)))
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    await share.close()
    cleanup = Redis.from_url(REDIS)
    async for key in cleanup.scan_iter(match=prefix + "*", count=1000):
        await cleanup.delete(key)
    await cleanup.aclose()
    print(f"{streams} streams of {events} events in {batches} batch(es), mirrored to Redis")
    per_stream = cpu / streams * 1e6
    print(f"  CPU per stream {per_stream:,.0f} µs, per event {per_stream / events:,.1f} µs")
    print(f"  wall {wall:.2f} s ({streams / wall:,.0f} streams/s)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, default=2000)
    parser.add_argument("--events", type=int, default=23)
    parser.add_argument("--batches", type=int, default=1)
    args = parser.parse_args()
    asyncio.run(main(args.streams, args.events, args.batches))
