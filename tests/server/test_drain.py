"""``on_disconnect = "drain"``: after the client leaves, the answer is read to its end
unsent, and the provider's own usage is charged (docs/api.md#credits-and-cancellation)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path
from typing import Any

from sluice.core.usage import Price, TokenUsage
from sluice.metering.charges import nano_from_pico
from sluice.metering.pricing import cost_pico
from sluice.server.lifecycle import RunningGateway
from sluice.storage.base import RequestFilters
from sluice.storage.factory import open_store
from tests.support.accounts import metered_key, settled
from tests.support.fake_openai import DONE, chunk, completion
from tests.support.fake_upstream import FakeUpstream, Pause, Reply, Step
from tests.support.gateway import openai_connection_toml, running_gateway
from tests.support.raw_http import RawClient, post

USD = 10**9
PRICE = Price.per_million(2.0, 8.0, cache_read=0.5)
USAGE = {"prompt_tokens": 1000, "completion_tokens": 500, "total_tokens": 1500}
BODY = json.dumps(
    {
        "model": "test/gpt-fake",
        "messages": [{"role": "user", "content": "hello there"}],
        "stream": True,
        "max_tokens": 2000,
    }
).encode()


def drain_toml(base_url: str, timeouts: str = "") -> str:
    return openai_connection_toml(base_url, timeouts=timeouts).replace(
        'api_key_env = "FAKE_UPSTREAM_KEY"',
        'api_key_env = "FAKE_UPSTREAM_KEY"\non_disconnect = "drain"',
    )


def long_answer(pieces: int, *, tail: list[Step]) -> list[Step]:
    steps: list[Step] = [chunk(role="assistant", content="")]
    for _ in range(pieces):
        steps += [chunk(content="abcdefgh"), Pause(0.01)]
    return steps + tail


async def leave_after(gw: RunningGateway, key: str, pieces: int) -> str:
    """Read ``pieces`` content chunks, hang up, return the request id."""
    client = await RawClient.connect(gw.host, gw.port)
    await client.send(post("/v1/chat/completions", BODY, key))
    _, headers = await client.read_head()
    seen = b""
    while seen.count(b"abcdefgh") < pieces:
        piece = await client.read_chunk()
        assert piece is not None
        seen += piece
    await client.close()
    return headers["x-request-id"]


async def logged(gw: RunningGateway, request_id: str, account_id: str) -> dict[str, Any]:
    async with asyncio.timeout(10):
        while True:
            await settled(gw.gateway)
            row = await gw.gateway.store.get_request(request_id, account_id)
            if row is not None:
                return {f: getattr(row, f) for f in row.__struct_fields__}
            await asyncio.sleep(0.02)


async def account_id(gw: RunningGateway, name: str) -> str:
    account = await gw.gateway.store.get_account(name)
    assert account is not None
    return account.id


async def test_a_drained_stream_is_charged_the_providers_usage(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    tail: list[Step] = [chunk(finish="stop"), chunk(usage=USAGE, choices=False), DONE]
    fake.queue(Reply.stream(*long_answer(50, tail=tail)))
    async with running_gateway(tmp_path, drain_toml(fake.base_url)) as gw:
        key = await metered_key(gw.gateway.store, "team", 1 * USD)
        request_id = await leave_after(gw, key, 3)
        row = await logged(gw, request_id, await account_id(gw, "team"))
        account = await gw.gateway.store.get_account("team")
        assert await gw.gateway.store.reconcile() == []
    assert fake.hangups == []  # the upstream answer was read to its end
    assert row["status"] == "cancelled" and row["disconnect"] == "drain"
    assert (row["prompt_tokens"], row["completion_tokens"]) == (1000, 500)
    assert row["usage_estimated"] is False and row["finish_reason"] == "stop"
    charged = nano_from_pico(
        cost_pico(TokenUsage(prompt_tokens=1000, completion_tokens=500), PRICE)
    )
    assert account is not None
    assert (account.balance, account.held, account.open_holds) == (1 * USD - charged, 0, 0)
    assert row["credits_charged"] == charged / USD


async def test_a_drain_that_stalls_charges_what_was_read(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    fake.queue(Reply.stream(*long_answer(20, tail=[Pause(5)])))
    config = drain_toml(fake.base_url, timeouts="stall = 0.3")
    async with running_gateway(tmp_path, config) as gw:
        key = await metered_key(gw.gateway.store, "team", 1 * USD)
        request_id = await leave_after(gw, key, 2)
        row = await logged(gw, request_id, await account_id(gw, "team"))
        account = await gw.gateway.store.get_account("team")
    assert row["status"] == "cancelled" and row["disconnect"] == "drain"
    assert row["error_code"] == "stream_stalled" and row["usage_estimated"] is True
    # every chunk the upstream sent was read and counted, not just the two delivered
    assert row["completion_tokens"] >= 20 * 8 // 4
    assert account is not None and account.held == 0 and account.open_holds == 0


async def test_shutdown_cuts_a_drain_short_and_still_settles_it(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    fake.queue(Reply.stream(*long_answer(10, tail=[Pause(30)])))
    async with running_gateway(tmp_path, drain_toml(fake.base_url)) as gw:
        key = await metered_key(gw.gateway.store, "team", 1 * USD)
        request_id = await leave_after(gw, key, 2)
        await asyncio.sleep(0.3)  # draining, the upstream silent
        team = await account_id(gw, "team")
        storage_url = gw.gateway.settings.storage_url
    # running_gateway stopped the gateway: the drain was cancelled and settled first
    store = await open_store(storage_url)
    try:
        row = await store.get_request(request_id, team)
        account = await store.get_account("team")
        mismatches = await store.reconcile()
    finally:
        await store.close()
    assert row is not None and row.status == "cancelled" and row.disconnect == "drain"
    assert row.completion_tokens >= 10 * 8 // 4 and row.usage_estimated
    assert account is not None and account.held == 0 and account.open_holds == 0
    assert account.balance < 1 * USD and mismatches == []


async def leave_while_waiting(gw: RunningGateway, fake: FakeUpstream, key: str) -> str:
    """Send a non-streamed request, hang up once the upstream has it; its request id
    (read from the request log once the request is settled)."""
    client = await RawClient.connect(gw.host, gw.port)
    await client.send(post("/v1/chat/completions", NON_STREAM, key))
    async with asyncio.timeout(5):
        while not fake.requests:
            await asyncio.sleep(0.01)
    await client.close()
    return await only_request_id(gw)


NON_STREAM = json.dumps({**json.loads(BODY), "stream": False}).encode()


async def test_a_non_streamed_answer_is_awaited_and_charged_after_the_client_left(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    answer = completion("a long answer", usage=USAGE)
    fake.queue(dataclasses.replace(Reply.json(answer), delay=0.5))
    async with running_gateway(tmp_path, drain_toml(fake.base_url)) as gw:
        key = await metered_key(gw.gateway.store, "team", 1 * USD)
        request_id = await leave_while_waiting(gw, fake, key)
        row = await logged(gw, request_id, await account_id(gw, "team"))
        account = await gw.gateway.store.get_account("team")
    assert fake.hangups == []
    assert row["status"] == "cancelled" and row["disconnect"] == "drain"
    assert (row["completion_tokens"], row["usage_estimated"]) == (500, False)
    charged = nano_from_pico(
        cost_pico(TokenUsage(prompt_tokens=1000, completion_tokens=500), PRICE)
    )
    assert account is not None and (account.balance, account.held) == (1 * USD - charged, 0)


async def test_without_drain_a_non_streamed_call_is_closed_and_costs_nothing(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    fake.queue(dataclasses.replace(Reply.json(completion("x", usage=USAGE)), delay=2))
    async with running_gateway(tmp_path, openai_connection_toml(fake.base_url)) as gw:
        key = await metered_key(gw.gateway.store, "team", 1 * USD)
        request_id = await leave_while_waiting(gw, fake, key)
        await asyncio.wait_for(fake.hung_up.wait(), 2)  # the upstream call was closed
        row = await logged(gw, request_id, await account_id(gw, "team"))
        account = await gw.gateway.store.get_account("team")
    assert row["status"] == "cancelled" and row["disconnect"] == "cancel"
    assert account is not None and (account.balance, account.held) == (1 * USD, 0)


async def test_a_stream_cut_by_shutdown_is_settled_not_drained(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    """The gateway stopping is not the client leaving: the call is closed, settled and
    logged as ``shutdown``, and the client gets the error event that says so."""
    fake.queue(Reply.stream(*long_answer(3, tail=[Pause(30)])))
    config = drain_toml(fake.base_url)
    async with running_gateway(tmp_path, config, stop_grace=0.2) as gw:
        key = await metered_key(gw.gateway.store, "team", 1 * USD)
        client = await RawClient.connect(gw.host, gw.port)
        await client.send(post("/v1/chat/completions", BODY, key))
        await client.read_head()
        await client.read_chunk()
        team = await account_id(gw, "team")
        storage_url = gw.gateway.settings.storage_url
    rest = b""
    while (piece := await client.read_chunk()) is not None and piece:
        rest += piece
    await client.close()
    store = await open_store(storage_url)
    try:
        account = await store.get_account("team")
        request_rows = await store.reconcile()
        (logged_row,) = await store.list_requests(RequestFilters(), 2, None)
        row = await store.get_request(logged_row.id, team)
    finally:
        await store.close()
    assert account is not None and (account.held, account.open_holds) == (0, 0)
    assert request_rows == []
    assert row is not None and row.status == "shutdown" and row.disconnect is None
    last = json.loads(rest.strip().split(b"\n\n")[-1].removeprefix(b"data: "))
    assert (last["error"]["type"], last["error"]["code"]) == (
        "server_error",
        "server_shutting_down",
    )
    assert b"[DONE]" not in rest
    await asyncio.wait_for(fake.hung_up.wait(), 2)


async def only_request_id(gw: RunningGateway) -> str:
    """The one request's id, once its request-log row is written."""
    async with asyncio.timeout(10):
        while True:
            await settled(gw.gateway)
            rows = await gw.gateway.store.list_requests(RequestFilters(), 2, None)
            if rows:
                assert len(rows) == 1
                return rows[0].id
            await asyncio.sleep(0.02)


def two_connection_route(drained: str, other: str) -> str:
    return f"""
[[connections]]
id = "conn_a"
provider = "openai-compatible"
base_url = "{drained}"
api_key_env = "FAKE_UPSTREAM_KEY"
on_disconnect = "drain"

[[connections]]
id = "conn_b"
provider = "openai-compatible"
base_url = "{other}"
api_key_env = "FAKE_UPSTREAM_KEY"

[[models]]
id = "test/a"
providers = {{ conn_a = "model-a" }}
price = {{ input = 2.0, output = 8.0 }}

[[models]]
id = "test/b"
providers = {{ conn_b = "model-b" }}
price = {{ input = 2.0, output = 8.0 }}

[[routes]]
name = "bot"
chain = [ {{ model = "test/a" }}, {{ model = "test/b" }} ]
"""


async def test_a_drained_call_that_fails_does_not_fail_over_for_nobody(tmp_path: Path) -> None:
    drained, other = FakeUpstream(), FakeUpstream()
    await drained.start()
    await other.start()
    try:
        error = Reply.json({"error": {"message": "overloaded"}}, status=503)
        drained.queue(dataclasses.replace(error, delay=0.5))
        other.queue(Reply.json(completion("an answer nobody reads", usage=USAGE)))
        body = json.dumps(
            {"model": "bot", "max_tokens": 100, "messages": [{"role": "user", "content": "hi"}]}
        ).encode()
        config = two_connection_route(drained.base_url, other.base_url)
        async with running_gateway(tmp_path, config) as gw:
            key = await metered_key(gw.gateway.store, "team", 1 * USD)
            client = await RawClient.connect(gw.host, gw.port)
            await client.send(post("/v1/chat/completions", body, key))
            async with asyncio.timeout(5):
                while not drained.requests:
                    await asyncio.sleep(0.01)
            await client.close()
            request_id = await only_request_id(gw)
            row = await logged(gw, request_id, await account_id(gw, "team"))
            account = await gw.gateway.store.get_account("team")
    finally:
        await drained.close()
        await other.close()
    assert other.requests == []
    assert row["disconnect"] == "drain" and row["error_type"] == "service_unavailable"
    assert account is not None and (account.balance, account.held) == (1 * USD, 0)


async def test_a_drain_ends_before_its_hold_would_expire(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    """An expired hold is reclaimed and charges nothing: the drain settles first."""
    fake.queue(Reply.stream(*long_answer(1000, tail=[])))  # ten seconds of answer
    config = "[metering]\nhold_ttl = 1\n" + drain_toml(fake.base_url)
    async with running_gateway(tmp_path, config) as gw:
        key = await metered_key(gw.gateway.store, "team", 1 * USD)
        request_id = await leave_after(gw, key, 2)
        row = await logged(gw, request_id, await account_id(gw, "team"))
        account = await gw.gateway.store.get_account("team")
    assert row["status"] == "cancelled" and row["disconnect"] == "drain"
    assert row["duration_ms"] < 1000
    assert account is not None and account.balance < 1 * USD
    assert (account.held, account.open_holds) == (0, 0)
