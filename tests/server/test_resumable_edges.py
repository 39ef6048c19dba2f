"""Resumable streams at their edges (issue 25, from a review of the first version): a
refused request leaves nothing behind; the resume URL is in the head even when a
keep-alive sends it first; a ``DELETE`` before the first event stops the stream; a
reconnect that comes and goes does not cut the first client; a stream read on alone
past its buffer is stopped; a bad ``Last-Event-ID`` is a 400."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

from tests.server.test_resumable import (
    FUNDS,
    PIECES,
    USAGE,
    body,
    config,
    delete,
    paced,
    read_rest,
    read_some,
    resume,
    start,
)
from tests.support.accounts import metered_key
from tests.support.fake_openai import text_stream
from tests.support.fake_upstream import FakeUpstream, Reply
from tests.support.gateway import running_gateway
from tests.support.raw_http import RawClient, exchange, get, post

RESUMABLE = {"stream_options": {"resumable": True}}


async def test_a_refused_request_leaves_no_stream_behind(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    async with running_gateway(tmp_path, config(fake)) as gw:
        key = await metered_key(gw.gateway.store, "team", FUNDS)
        refused = await exchange(
            gw.host, gw.port, post("/v1/chat/completions", body(model="no/such", **RESUMABLE), key)
        )
        request_id = refused.headers["x-request-id"]
        found = await asyncio.wait_for(
            exchange(gw.host, gw.port, resume(f"/v1/streams/{request_id}", key, None)), 2
        )
    assert refused.status == 404
    assert found.status == 404  # not a 200 that waits forever on a stream never begun


async def test_the_resume_url_is_in_a_head_a_keep_alive_sent(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    fake.default = Reply.stream(*text_stream(*PIECES, usage=USAGE), delay=0.6)
    streams = "[server]\nport = 0\nsse_keepalive_interval = 0.1\n"
    async with running_gateway(tmp_path, streams + config(fake)) as gw:
        key = await metered_key(gw.gateway.store, "team", FUNDS)
        client, head = await start(gw, key, body(**RESUMABLE))
        first = await client.read_chunk()
        rest = await read_rest(client)
        await client.close()
    assert first is not None and first.startswith(b":")  # the keep-alive went first
    assert head["x-sluice-resume-url"] == f"/v1/streams/{head['x-request-id']}"
    assert rest.endswith(b"data: [DONE]\n\n")


async def test_delete_before_the_first_event_stops_the_stream(
    tmp_path: Path,
    fake: FakeUpstream,
) -> None:
    fake.default = Reply.stream(*text_stream(*PIECES, usage=USAGE), delay=1.0)
    streams = "[server]\nport = 0\nsse_keepalive_interval = 0.1\n"
    async with running_gateway(tmp_path, streams + config(fake)) as gw:
        key = await metered_key(gw.gateway.store, "team", FUNDS)
        client, head = await start(gw, key, body(**RESUMABLE))
        stopped = await exchange(gw.host, gw.port, delete(head["x-sluice-resume-url"], key))
        await asyncio.wait_for(fake.hung_up.wait(), 2)
        await read_rest_or_cut(client)
        await gw.gateway.writer.flush()
        row = (
            await exchange(gw.host, gw.port, get(f"/v1/requests/{head['x-request-id']}", key))
        ).json()
    assert stopped.json()["status"] == "cancelled"
    assert row["status"] == "cancelled" and row["completion_tokens"] == 0


async def read_rest_or_cut(client: RawClient) -> None:
    with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
        await read_rest(client)
    await client.close()


async def test_a_reconnect_that_leaves_does_not_cut_the_first_client(
    tmp_path: Path,
    fake: FakeUpstream,
) -> None:
    """A reader that came and went while the first client still read started the
    give-up timer against the live stream: at the retention it cancelled it."""
    fake.default = paced(0.08)  # about 1.3 s
    streams = "[streams]\nresume_retention = 0.3\n"
    async with running_gateway(tmp_path, config(fake, streams)) as gw:
        key = await metered_key(gw.gateway.store, "team", FUNDS)
        client, head = await start(gw, key, body(**RESUMABLE))
        before = await read_some(client, 2)
        other = await RawClient.connect(gw.host, gw.port)
        await other.send(resume(head["x-sluice-resume-url"], key, None))
        await other.read_head()
        await other.read_chunk()
        await other.close()  # a reconnect that leaves
        rest = await read_rest(client)  # well past the 0.3 s retention
        await client.close()
    assert (before + rest).endswith(b"data: [DONE]\n\n")


async def test_a_stream_read_on_alone_past_its_buffer_is_stopped(
    tmp_path: Path,
    fake: FakeUpstream,
) -> None:
    fake.default = paced(0.05)
    streams = "[streams]\nresume_max_bytes = 1024\n"
    async with running_gateway(tmp_path, config(fake, streams)) as gw:
        key = await metered_key(gw.gateway.store, "team", FUNDS)
        client, head = await start(gw, key, body(**RESUMABLE))
        await read_some(client, 2)
        await client.close()
        await asyncio.wait_for(fake.hung_up.wait(), 3)  # stopped, not read to the end
        await asyncio.sleep(0.1)
        await gw.gateway.writer.flush()
        row = (
            await exchange(gw.host, gw.port, get(f"/v1/requests/{head['x-request-id']}", key))
        ).json()
        late = await exchange(gw.host, gw.port, resume(head["x-sluice-resume-url"], key, None))
    assert row["disconnect"] == "abandoned" and row["completion_tokens"] < 12
    assert late.status == 410


async def test_a_last_event_id_naming_no_event_is_a_400(tmp_path: Path, fake: FakeUpstream) -> None:
    fake.default = paced()
    async with running_gateway(tmp_path, config(fake)) as gw:
        key = await metered_key(gw.gateway.store, "team", FUNDS)
        client, head = await start(gw, key, body(**RESUMABLE))
        await read_rest(client)
        await client.close()
        url, request_id = head["x-sluice-resume-url"], head["x-request-id"]
        answers = [
            await exchange(gw.host, gw.port, resume(url, key, f"{request_id}.{bad}"))
            for bad in ("\u00b2", "9" * 5000, "999", "-1")
        ]
    for answer in answers:
        assert answer.status == 400, answer.body
        assert answer.json()["error"]["code"] == "invalid_last_event_id"
