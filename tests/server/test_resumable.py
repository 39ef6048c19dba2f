"""Resumable streams (issue 25, docs/api.md#resumable-streams): a stream asked for
resumable carries an ``id:`` per event and ``X-Sluice-Resume-Url``; when its client is
cut off the gateway reads the upstream on, and a reconnect with ``Last-Event-ID`` gets
every event after it, then the live tail, then the end: the cut client's part and the
resumed part are the whole stream, the upstream asked once and charged once. ``DELETE``
stops it at once, charged for what was produced; another account's id is a 404, a
stream past its retention or its buffer a 410 ``stream_expired``."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from sluice.core.principal import KeyPolicy
from sluice.server.lifecycle import RunningGateway
from tests.support.accounts import metered_key
from tests.support.fake_openai import text_stream
from tests.support.fake_upstream import FakeUpstream, Pause, Reply
from tests.support.gateway import running_gateway
from tests.support.raw_http import RawClient, exchange, get, post

FUNDS = 10**9
USAGE = {"prompt_tokens": 9, "completion_tokens": 12, "total_tokens": 21}
PIECES = [f"w{i} " for i in range(12)]


@pytest.fixture
async def fake() -> AsyncIterator[FakeUpstream]:
    """An OpenAI-format upstream answering the twelve pieces, paced (``paced()``)."""
    upstream = FakeUpstream()
    await upstream.start()
    upstream.default = paced()
    yield upstream
    await upstream.close()


def config(fake: FakeUpstream, streams: str = "") -> str:
    return (
        f"{streams}"
        f'[[connections]]\nid = "conn_fake"\nprovider = "openai-compatible"\n'
        f'base_url = "{fake.base_url}"\n'
        '[[models]]\nid = "test/m"\nproviders = { conn_fake = "m" }\n'
        "price = { input = 1.0, output = 2.0 }\n"
    )


def paced(gap: float = 0.03) -> Reply:
    """The twelve pieces with a pause between each, then usage and [DONE]."""
    steps = text_stream(*PIECES, usage=USAGE)
    spaced: list[object] = []
    for step in steps:
        spaced += [step, Pause(gap)]
    return Reply.stream(*spaced)  # type: ignore[arg-type]


def body(**extra: object) -> bytes:
    doc = {"model": "test/m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    return json.dumps(doc | extra).encode()


def events(raw: bytes) -> list[bytes]:
    return [e for e in raw.split(b"\n\n") if e]


def event_id(event: bytes) -> str:
    first = event.split(b"\n", 1)[0]
    assert first.startswith(b"id: "), event
    return first[4:].decode()


async def read_some(client: RawClient, count: int) -> bytes:
    """The chunks of the body until ``count`` whole events came."""
    got = b""
    while len(events(got)) < count or not got.endswith(b"\n\n"):
        chunk = await client.read_chunk()
        assert chunk is not None
        got += chunk
    return got


async def read_rest(client: RawClient) -> bytes:
    got = b""
    while (chunk := await client.read_chunk()) is not None:
        got += chunk
    return got


async def start(
    gw: RunningGateway, key: str, data: bytes, path: str = "/v1/chat/completions", extra: str = ""
) -> tuple[RawClient, dict[str, str]]:
    client = await RawClient.connect(gw.host, gw.port)
    await client.send(post(path, data, key, extra=extra))
    status, head = await client.read_head()
    assert status == 200
    return client, head


def delete(path: str, key: str) -> bytes:
    return f"DELETE {path} HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {key}\r\n\r\n".encode()


def resume(path: str, key: str, last: str | None) -> bytes:
    return get(path, key, extra=f"Last-Event-ID: {last}\r\n" if last else "")


async def test_a_cut_stream_resumes_where_it_broke_charged_once(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    async with running_gateway(tmp_path, config(fake)) as gw:
        key = await metered_key(gw.gateway.store, "team", FUNDS)
        client, head = await start(gw, key, body(stream_options={"resumable": True}))
        url = head["x-sluice-resume-url"]
        assert url == f"/v1/streams/{head['x-request-id']}"
        before = await read_some(client, 4)
        await client.close()  # cut: the gateway reads on
        await asyncio.sleep(0.1)
        last = event_id(events(before)[-1])
        again = await RawClient.connect(gw.host, gw.port)
        await again.send(resume(url, key, last))
        status, resumed_head = await again.read_head()
        after = await read_rest(again)
        await again.close()
        whole = await exchange(gw.host, gw.port, resume(url, key, None))
        await gw.gateway.writer.flush()
        row = (
            await exchange(gw.host, gw.port, get(f"/v1/requests/{head['x-request-id']}", key))
        ).json()
    assert status == 200 and resumed_head["content-type"].startswith("text/event-stream")
    assert before + after == whole.body  # nothing lost, nothing twice
    ids = [event_id(e) for e in events(whole.body)]
    assert ids == [f"{head['x-request-id']}.{n}" for n in range(1, len(ids) + 1)]
    assert whole.body.endswith(b"data: [DONE]\n\n")
    assert b"".join(PIECES_B) in b"".join(_contents(whole.body))
    assert len(fake.requests) == 1  # the upstream asked once
    assert row["status"] == "complete" and row["disconnect"] == "resumable"
    assert row["completion_tokens"] == 12 and row["credits_charged"] == row["cost"]


PIECES_B = [p.encode() for p in PIECES]


def _contents(raw: bytes) -> list[bytes]:
    out = []
    for event in events(raw):
        data = event.split(b"data: ", 1)[1]
        if data != b"[DONE]":
            for choice in json.loads(data).get("choices", []):
                out.append((choice.get("delta", {}).get("content") or "").encode())
    return out


async def cut_after(
    gw: RunningGateway,
    key: str,
    count: int,
    data: bytes | None = None,
    path: str = "/v1/chat/completions",
    extra: str = "",
) -> tuple[str, str, bytes]:
    """A resumable stream cut after ``count`` events: its request id, resume URL, bytes."""
    data = data if data is not None else body(stream_options={"resumable": True})
    client, head = await start(gw, key, data, path, extra)
    before = await read_some(client, count)
    await client.close()
    return head["x-request-id"], head["x-sluice-resume-url"], before


@pytest.mark.parametrize(
    ("path", "doc"),
    [
        ("/v1/messages", {"model": "test/m", "max_tokens": 50, "stream": True,
                          "messages": [{"role": "user", "content": "hi"}]}),
        ("/v1/responses", {"model": "test/m", "stream": True, "input": "hi", "store": False}),
    ],
)  # fmt: skip
async def test_messages_and_responses_resume_when_the_header_asks(
    tmp_path: Path, fake: FakeUpstream, path: str, doc: dict[str, object]
) -> None:
    async with running_gateway(tmp_path, config(fake)) as gw:
        key = await metered_key(gw.gateway.store, "team", FUNDS)
        data = json.dumps(doc).encode()
        _, url, before = await cut_after(
            gw, key, 5, data=data, path=path, extra="X-Sluice-Resumable: true\r\n"
        )
        last = event_id(events(before)[-1])
        after = await exchange(gw.host, gw.port, resume(url, key, last))
        whole = await exchange(gw.host, gw.port, resume(url, key, None))
    assert before + after.body == whole.body
    end = b"event: message_stop" if path == "/v1/messages" else b"event: response.completed"
    assert end in events(whole.body)[-1] and len(fake.requests) == 1


async def test_a_keys_resumable_policy_makes_every_stream_resumable(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    async with running_gateway(tmp_path, config(fake)) as gw:
        policy = KeyPolicy(resumable=True)
        key = await metered_key(gw.gateway.store, "team", FUNDS, policy)
        client, head = await start(gw, key, body())  # the request does not ask
        rest = await read_rest(client)
        await client.close()
    assert head["x-sluice-resume-url"].endswith(head["x-request-id"])
    assert all(event_id(e) for e in events(rest))


async def test_a_stream_not_asked_resumable_is_as_before(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    async with running_gateway(tmp_path, config(fake)) as gw:
        key = await metered_key(gw.gateway.store, "team", FUNDS)
        client, head = await start(gw, key, body())
        before = await read_some(client, 3)
        await client.close()
        request_id = head["x-request-id"]
        gone = await exchange(gw.host, gw.port, resume(f"/v1/streams/{request_id}", key, None))
        await asyncio.sleep(0.2)
        await gw.gateway.writer.flush()
        row = (await exchange(gw.host, gw.port, get(f"/v1/requests/{request_id}", key))).json()
    assert "x-sluice-resume-url" not in head and not before.startswith(b"id: ")
    assert gone.status == 404 and gone.json()["error"]["code"] == "unknown_url"
    assert row["disconnect"] == "cancel" and row["completion_tokens"] < 12


async def test_delete_stops_it_at_once_charged_for_what_it_made(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    fake.default = paced(0.2)
    async with running_gateway(tmp_path, config(fake)) as gw:
        key = await metered_key(gw.gateway.store, "team", FUNDS)
        request_id, url, _ = await cut_after(gw, key, 3)
        other = await metered_key(gw.gateway.store, "other", FUNDS)
        foreign = await exchange(gw.host, gw.port, delete(url, other))
        began = asyncio.get_running_loop().time()
        stopped = await exchange(gw.host, gw.port, delete(url, key))
        await asyncio.wait_for(fake.hung_up.wait(), 2)  # the upstream call is closed
        closed_in = fake.hangups[0] - began
        late = await exchange(gw.host, gw.port, resume(url, key, None))
        await asyncio.sleep(0.05)
        await gw.gateway.writer.flush()
        row = (await exchange(gw.host, gw.port, get(f"/v1/requests/{request_id}", key))).json()
    assert foreign.status == 404
    assert stopped.status == 200 and stopped.json()["status"] == "cancelled"
    assert closed_in < 0.05, closed_in
    assert late.status == 410 and late.json()["error"]["code"] == "stream_expired"
    assert "cancelled" in late.json()["error"]["message"]
    assert row["status"] == "cancelled" and row["disconnect"] == "cancel"
    assert 0 < row["completion_tokens"] < 12
    assert row["credits_charged"] == row["cost"] < row["credits_held"]


async def test_nobody_resuming_within_the_retention_abandons_it(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    fake.default = paced(0.2)
    streams = "[streams]\nresume_retention = 0.3\n"
    async with running_gateway(tmp_path, config(fake, streams)) as gw:
        key = await metered_key(gw.gateway.store, "team", FUNDS)
        request_id, url, _ = await cut_after(gw, key, 3)
        await asyncio.sleep(0.8)
        late = await exchange(gw.host, gw.port, resume(url, key, None))
        await gw.gateway.writer.flush()
        row = (await exchange(gw.host, gw.port, get(f"/v1/requests/{request_id}", key))).json()
    assert late.status == 410 and "nobody resumed it" in late.json()["error"]["message"]
    assert row["status"] == "cancelled" and row["disconnect"] == "abandoned"
    assert 0 < row["completion_tokens"] < 12 and row["credits_charged"] == row["cost"]


async def test_past_its_buffer_a_stream_is_no_longer_resumable(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    fake.default = paced(0.01)
    streams = "[streams]\nresume_max_bytes = 1024\n"
    async with running_gateway(tmp_path, config(fake, streams)) as gw:
        key = await metered_key(gw.gateway.store, "team", FUNDS)
        client, head = await start(gw, key, body(stream_options={"resumable": True}))
        served = await read_rest(client)  # a reader still on the line is served on
        await client.close()
        url = head["x-sluice-resume-url"]
        late = await exchange(gw.host, gw.port, resume(url, key, None))
    assert served.endswith(b"data: [DONE]\n\n") and len(served) > 1024
    assert late.status == 410 and "buffer" in late.json()["error"]["message"]
