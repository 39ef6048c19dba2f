"""Resumable streams across processes at their edges (docs/api.md#several-replicas): a
reader elsewhere keeps the stream from being given up while it reads; a stop asked
elsewhere answers how the stream really ended; an event id past a mirrored stream's
end is refused as on its own process; an id that is not a request id never reaches
Redis."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from sluice.server.lifecycle import RunningGateway
from tests.server.test_relay_shared import FUNDS, two
from tests.server.test_resumable import (
    config,
    cut_after,
    delete,
    events,
    fake,
    paced,
    resume,
)
from tests.support.accounts import metered_key
from tests.support.fake_upstream import FakeUpstream
from tests.support.raw_http import exchange, get

__all__ = ["fake"]
SHORT = "[streams]\nresume_retention = 1\n"


@asynccontextmanager
async def keyed(
    tmp_path: Path, fake: FakeUpstream, gap: float, streams: str = ""
) -> AsyncIterator[tuple[RunningGateway, RunningGateway, str]]:
    """Two gateways on one Redis, ``fake`` paced ``gap`` apart, and a funded key."""
    fake.default = paced(gap)
    async with two(tmp_path, config(fake, streams)) as (a, b):
        yield a, b, await metered_key(a.gateway.store, "team", FUNDS)


async def test_a_reader_elsewhere_keeps_the_stream_past_the_retention(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    """The stream runs 3 s; its client left at 0.6 s and the retention is 1 s: the
    reader on the other process still gets it whole."""
    async with keyed(tmp_path, fake, 0.2, SHORT) as (a, b, key):
        _, url, before = await cut_after(a, key, 3)
        after = await exchange(b.host, b.port, resume(url, key, None))
    assert after.status == 200 and after.body.endswith(b"data: [DONE]\n\n")
    assert after.body.startswith(before)


async def test_a_stop_elsewhere_answers_as_the_stream_ended(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    async with keyed(tmp_path, fake, 0.2) as (a, b, key):
        _, url, _ = await cut_after(a, key, 3)
        stopped = await exchange(b.host, b.port, delete(url, key))
        whole = await exchange(b.host, b.port, resume(url, key, None))
        fake.default = paced(0.0)
        _, done_url, _ = await cut_after(a, key, 2)
        await asyncio.sleep(0.5)  # it ran to its end unread
        kept = await exchange(b.host, b.port, resume(done_url, key, None))
        late = await exchange(b.host, b.port, delete(done_url, key))
    # every event the owner produced before it stopped, as its mirror counted them
    assert stopped.status == 200 and stopped.json()["status"] == "cancelled"
    assert stopped.json()["events"] >= 3
    assert whole.status == 410
    assert late.status == 200 and late.json()["status"] == "complete"
    assert late.json()["events"] == len(events(kept.body))


async def test_an_event_past_a_mirrored_streams_end_is_refused(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    async with keyed(tmp_path, fake, 0.0) as (a, b, key):
        request_id, url, _ = await cut_after(a, key, 2)
        await asyncio.sleep(0.3)  # ended on a
        whole = await exchange(b.host, b.port, resume(url, key, None))
        count = len(events(whole.body))
        past = await exchange(b.host, b.port, resume(url, key, f"{request_id}.{count + 1}"))
        last = await exchange(b.host, b.port, resume(url, key, f"{request_id}.{count}"))
    assert past.status == 400 and past.json()["error"]["code"] == "invalid_last_event_id"
    assert last.status == 200 and events(last.body) == []


async def test_an_id_that_is_no_request_id_is_not_asked_for(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    async with keyed(tmp_path, fake, 0.0) as (a, _, key):
        began = time.monotonic()
        odd = await exchange(a.host, a.port, get("/v1/streams/req_*%20x", key))
        took = time.monotonic() - began
    assert odd.status == 404
    assert took < 0.5  # no want published, no wait for an owner
