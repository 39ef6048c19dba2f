"""The toolkit resumes a resumable stream on its own (issue 25): cut by the network
mid-answer, the async and the sync client reconnect to ``X-Sluice-Resume-Url`` with
``Last-Event-ID`` and finish the same answer (the result counts the resume), the
upstream asked once; a consumer that closes the stream stops it with ``DELETE``."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from sluice.client import AsyncChatClient, ChatClient, RetryPolicy
from sluice.client.events import ContentDelta, StreamResult
from sluice.server.lifecycle import RunningGateway
from tests.support.accounts import metered_key
from tests.support.cutting_proxy import CuttingProxy
from tests.support.fake_openai import text_stream
from tests.support.fake_upstream import FakeUpstream, Pause, Reply, Step
from tests.support.gateway import running_gateway
from tests.support.raw_http import exchange, get

PIECES = tuple(f"part{i} " for i in range(20))
USAGE = {"prompt_tokens": 5, "completion_tokens": 20, "total_tokens": 25}
USER = [{"role": "user", "content": "hi"}]


def paced(gap: float) -> Reply:
    steps: list[Step] = []
    for step in text_stream(*PIECES, usage=USAGE):
        steps += [step, Pause(gap)]
    return Reply.stream(*steps)


@pytest.fixture
async def fake() -> AsyncIterator[FakeUpstream]:
    upstream = FakeUpstream()
    await upstream.start()
    upstream.default = paced(0.02)
    yield upstream
    await upstream.close()


def config(fake: FakeUpstream) -> str:
    return (
        f'[[connections]]\nid = "conn_fake"\nprovider = "openai-compatible"\n'
        f'base_url = "{fake.base_url}"\n'
        '[[models]]\nid = "test/m"\nproviders = { conn_fake = "m" }\n'
        "price = { input = 1.0, output = 2.0 }\n"
    )


async def proxied(gw: RunningGateway, cut_after: int) -> CuttingProxy:
    proxy = CuttingProxy(gw.host, gw.port, cut_after)
    await proxy.start()
    return proxy


async def test_the_async_client_resumes_a_cut_stream(tmp_path: Path, fake: FakeUpstream) -> None:
    async with running_gateway(tmp_path, config(fake)) as gw:
        key = await metered_key(gw.gateway.store, "team", 10**9)
        proxy = await proxied(gw, 2500)  # the head and a few events
        try:
            async with AsyncChatClient(proxy.base_url, key) as client:
                result = await client.stream("test/m", USER, resumable=True).collect()
        finally:
            await proxy.close()
    assert proxy.cuts == 1 and proxy.connections == 2
    assert result.state == "complete" and result.resumes == 1
    assert result.text == "".join(PIECES)
    assert result.usage is not None and result.usage.completion_tokens == 20
    assert len(fake.requests) == 1
    assert result.request_id is not None and result.request_id.startswith("req_")


def test_the_sync_client_resumes_a_cut_stream(tmp_path: Path) -> None:
    async def run() -> tuple[StreamResult, CuttingProxy]:
        upstream = FakeUpstream()  # on this loop: the fixture's is not running here
        await upstream.start()
        upstream.default = paced(0.02)
        try:
            async with running_gateway(tmp_path, config(upstream)) as gw:
                key = await metered_key(gw.gateway.store, "team", 10**9)
                proxy = await proxied(gw, 2500)
                try:
                    client = ChatClient(proxy.base_url, key)
                    stream = client.stream("test/m", USER, resumable=True)
                    found = await asyncio.to_thread(stream.collect)
                finally:
                    await proxy.close()
                return found, proxy
        finally:
            await upstream.close()

    result, proxy = asyncio.run(run())
    assert proxy.cuts == 1
    assert result.state == "complete" and result.resumes == 1
    assert result.text == "".join(PIECES)


async def test_resumes_stop_at_the_policys_limit_and_the_stream_is_stopped(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    """Out of resumes, the client gives up and says so with ``DELETE``: else the
    gateway would read the stream on, charged, for a reconnect that will not come."""
    async with running_gateway(tmp_path, config(fake)) as gw:
        key = await metered_key(gw.gateway.store, "team", 10**9)
        proxy = await proxied(gw, 2500)
        try:
            retry = RetryPolicy(max_resumes=0)
            async with AsyncChatClient(proxy.base_url, key, retry=retry) as client:
                result = await client.stream("test/m", USER, resumable=True).collect()
        finally:
            await proxy.close()
        await asyncio.wait_for(fake.hung_up.wait(), 2)
        await gw.gateway.writer.flush()
        row = await exchange(gw.host, gw.port, get(f"/v1/requests/{result.request_id}", key))
    assert result.state == "incomplete" and result.resumes == 0
    assert json.loads(row.body)["disconnect"] == "cancel"


async def test_closing_a_resumable_stream_stops_it_with_delete(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    fake.default = paced(0.2)
    async with running_gateway(tmp_path, config(fake)) as gw:
        key = await metered_key(gw.gateway.store, "team", 10**9)
        async with AsyncChatClient(gw.base_url + "/v1", key) as client:
            stream = client.stream("test/m", USER, resumable=True)
            async for item in stream:
                if isinstance(item, ContentDelta):
                    break
            await stream.aclose()
        await asyncio.wait_for(fake.hung_up.wait(), 2)
        assert stream.result is not None and stream.result.request_id is not None
        await gw.gateway.writer.flush()
        row = await exchange(gw.host, gw.port, get(f"/v1/requests/{stream.result.request_id}", key))
    assert json.loads(row.body)["disconnect"] == "cancel"
