"""Resumable streams and background responses across processes (issue 25, docs/api.md
#several-replicas): two gateways on one PostgreSQL and one Redis. A stream cut on one
is resumed on the other; a ``DELETE`` on the other stops it where it runs; a background
response running on one is polled, streamed again and cancelled through the other; a
stream whose owner died ends cut for its reader."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from openai import AsyncOpenAI

from sluice.exchange.relay import Relay
from sluice.server.lifecycle import RunningGateway
from sluice.storage.redis_mirror import RedisMirror
from tests.server.test_resumable import (
    PIECES_B,
    _contents,
    config,
    cut_after,
    delete,
    event_id,
    events,
    fake,
    paced,
    read_rest,
    read_some,
    resume,
    start,
)
from tests.support.accounts import metered_key
from tests.support.databases import fresh_postgres
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import running_gateway
from tests.support.raw_http import RawClient, exchange, get

__all__ = ["fake"]
FUNDS = 10**9
REDIS = "redis://127.0.0.1:6379/0"
DEMO = (
    '[[connections]]\nid = "conn_demo"\nprovider = "demo"\n'
    "options = { first_token_ms = 150, token_ms = 25 }\n"
)


def shared(dsn: str, prefix: str) -> str:
    return f'[storage]\nurl = "{dsn}"\n[limits]\nredis_url = "{REDIS}"\nkey_prefix = "{prefix}"\n'


@asynccontextmanager
async def two(tmp_path: Path, extra: str) -> AsyncIterator[tuple[RunningGateway, RunningGateway]]:
    """Two gateways sharing a fresh database and a Redis key prefix of their own."""
    prefix = f"sluice-test:{uuid.uuid4().hex}:"
    async with fresh_postgres() as dsn:
        text = shared(dsn, prefix) + extra
        async with (
            running_gateway(tmp_path / "a", text) as a,
            running_gateway(tmp_path / "b", text) as b,
        ):
            yield a, b


def body(**extra: object) -> bytes:
    doc = {"model": "test/m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    return json.dumps(doc | extra).encode()


async def test_a_stream_cut_on_one_process_resumes_on_another(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    async with two(tmp_path, config(fake)) as (a, b):
        key = await metered_key(a.gateway.store, "team", FUNDS)
        client, head = await start(a, key, body(stream_options={"resumable": True}))
        url, request_id = head["x-sluice-resume-url"], head["x-request-id"]
        before = await read_some(client, 4)
        await client.close()  # cut: a reads on, mirroring to Redis
        last = event_id(events(before)[-1])
        again = await RawClient.connect(b.host, b.port)
        await again.send(resume(url, key, last))
        status, resumed_head = await again.read_head()
        after = await read_rest(again)
        await again.close()
        whole = await exchange(b.host, b.port, resume(url, key, None))
        await a.gateway.writer.flush()
        row = (await exchange(b.host, b.port, get(f"/v1/requests/{request_id}", key))).json()
    assert status == 200 and resumed_head["content-type"].startswith("text/event-stream")
    assert resumed_head["x-sluice-resume-url"] == url
    assert before + after == whole.body  # nothing lost, nothing twice, across processes
    assert whole.body.endswith(b"data: [DONE]\n\n")
    assert b"".join(PIECES_B) in b"".join(_contents(whole.body))
    assert len(fake.requests) == 1
    assert row["status"] == "complete" and row["completion_tokens"] == 12


async def test_a_stop_asked_on_another_process_stops_the_stream(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    fake.default = paced(0.2)
    async with two(tmp_path, config(fake)) as (a, b):
        key = await metered_key(a.gateway.store, "team", FUNDS)
        other = await metered_key(a.gateway.store, "other", FUNDS)
        request_id, url, _ = await cut_after(a, key, 3)  # a reads on, alone
        await asyncio.sleep(0.1)  # the mirror's first batch is written
        foreign = await exchange(b.host, b.port, delete(url, other))
        stopped = await exchange(b.host, b.port, delete(url, key))
        await asyncio.wait_for(fake.hung_up.wait(), 2)  # a closed the upstream call
        await asyncio.sleep(0.1)  # and its mirror says so (its next batch)
        late = await exchange(b.host, b.port, resume(url, key, None))
        await asyncio.sleep(0.05)
        await a.gateway.writer.flush()
        row = (await exchange(a.host, a.port, get(f"/v1/requests/{request_id}", key))).json()
    assert foreign.status == 404  # another account's stream is unknown to it
    assert stopped.status == 200 and stopped.json()["status"] == "cancelled"
    assert late.status == 410 and "cancelled" in late.json()["error"]["message"]
    assert row["status"] == "cancelled" and 0 < row["completion_tokens"] < 12


def sdk(gw: RunningGateway, key: str) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=gw.base_url + "/v1", api_key=key, max_retries=0)


async def test_a_background_response_is_read_and_cancelled_through_another_process(
    tmp_path: Path,
) -> None:
    async with two(tmp_path, DEMO) as (a, b):
        key = await metered_key(a.gateway.store, "team", FUNDS)
        async with sdk(a, key) as on_a, sdk(b, key) as on_b:
            made = await on_a.responses.create(model="sluice/demo", input="Hi", background=True)
            polled = await on_b.responses.retrieve(made.id)
            statuses = {polled.status}
            for _ in range(100):
                statuses.add((await on_b.responses.retrieve(made.id)).status)
                if "in_progress" in statuses:
                    break
                await asyncio.sleep(0.02)
            async with on_b.responses.stream(response_id=made.id) as helper:
                folded = await helper.get_final_response()
            done = await on_b.responses.retrieve(made.id)
            second = await on_a.responses.create(
                model="sluice/demo", input="Hi", background=True, max_output_tokens=400
            )
            await asyncio.sleep(0.4)
            cancelled = await on_b.responses.cancel(second.id)
            seen_on_a = await on_a.responses.retrieve(second.id)
    assert statuses <= {"queued", "in_progress"} and "in_progress" in statuses
    assert folded.status == "completed" and folded.output_text == done.output_text
    assert done.status == "completed" and done.id == made.id
    assert cancelled.status == "cancelled" and seen_on_a.status == "cancelled"


async def test_a_reader_of_a_stream_whose_owner_died_sees_it_cut() -> None:
    """The owner's key expires with no end: the reader gets the events mirrored, then
    ``lost`` (its response ends without the door's end)."""
    share = RedisMirror.from_url(REDIS, f"sluice-test:{uuid.uuid4().hex}:")
    try:
        relay = Relay("req_owner_died", "acct", 1 << 20)
        relay.stamp(b"data: one\n\ndata: two\n\n")
        share.mirror(relay, retention=30)
        await asyncio.sleep(0.2)  # mirrored; then the owner "dies": no more refreshes,
        for task in list(share._tasks):  # and its key gone (as when it expires)
            task.cancel()
        await asyncio.sleep(0)
        await share._client.delete(share._names(relay.request_id)[2])
        found = await share.find("req_owner_died", "acct")
        got: list[Any] = []
        async with asyncio.timeout(5):
            async for batch in share.tail("req_owner_died", 1):
                got.append(batch)
    finally:
        await share.close()
    assert found is not None and found.count == 2 and found.ended is None
    assert got[-1] == "lost"
    assert b"".join(x for batch in got[:-1] for x in batch) == relay.events[1]
