"""What an upstream sends is untrusted input: its numbers, its errors, its stream sizes,
its pace and its indices (issue 10). Each test is the regression for one finding."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

import pytest
from openai import AsyncOpenAI

from sluice.core.usage import MAX_REPORTED_TOKENS
from sluice.server.lifecycle import RunningGateway
from tests.support.accounts import metered_key, settled
from tests.support.fake_openai import DONE, chunk, completion, openai_default, text_stream
from tests.support.fake_upstream import FakeUpstream, Pause, Reply, Step
from tests.support.gateway import UPSTREAM_KEY, openai_connection_toml, running_gateway
from tests.support.raw_http import exchange, get, post

USD = 10**9
PROMPT = [{"role": "user", "content": "count to three"}]


def chat(stream: bool, **extra: Any) -> bytes:
    body: dict[str, Any] = {"model": "test/gpt-fake", "messages": PROMPT, "max_tokens": 100}
    if stream:
        body |= {"stream": True, "stream_options": {"include_usage": True}}
    return json.dumps(body | extra).encode()


def events(raw: bytes) -> list[Any]:
    return [
        e.removeprefix(b"data: ")
        if e.endswith(b"[DONE]")
        else json.loads(e.removeprefix(b"data: "))
        for e in raw.split(b"\n\n")
        if e.startswith(b"data: ")
    ]


def usage_event(usage_json: bytes) -> bytes:
    """A usage chunk with the usage object as raw JSON text (``1e999`` is infinity)."""
    return (
        b'data: {"id":"x","object":"chat.completion.chunk","created":1,"model":"m",'
        b'"choices":[],"usage":' + usage_json + b"}\n\n"
    )


async def record(gw: RunningGateway, request_id: str, key: str) -> Any:
    return (await exchange(gw.host, gw.port, get(f"/v1/requests/{request_id}", key))).json()


# -- 1. an upstream cannot mint credits -------------------------------------------------

HOSTILE_USAGE = {
    "negative-cost": b'{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15,"cost":-300}',
    "negative-counts": b'{"prompt_tokens":-1000000,"completion_tokens":-1000000,'
    b'"total_tokens":-2000000,"prompt_tokens_details":{"cached_tokens":-5000000}}',
    "infinite-cost": b'{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15,"cost":1e999}',
    "absurd": b'{"prompt_tokens":1000000000000000,"completion_tokens":1000000000000000,'
    b'"total_tokens":1,"cost":1e300}',
}


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
@pytest.mark.parametrize("usage", list(HOSTILE_USAGE.values()), ids=list(HOSTILE_USAGE))
async def test_an_upstreams_usage_never_credits_the_account(
    tmp_path: Path, fake: FakeUpstream, usage: bytes, stream: bool
) -> None:
    if stream:
        fake.queue(Reply.stream(*text_stream("a", "b")[:-1], usage_event(usage), DONE))
    else:
        doc = json.dumps(completion("ab")).encode()
        whole = doc.replace(json.dumps(completion("ab")["usage"]).encode(), usage)
        fake.queue(Reply(200, {"content-type": "application/json"}, whole))
    async with running_gateway(tmp_path, openai_connection_toml(fake.base_url)) as gw:
        store = gw.gateway.store
        key = await metered_key(store, "team", USD)
        resp = await exchange(gw.host, gw.port, post("/v1/chat/completions", chat(stream), key))
        row = await record(gw, resp.headers["x-request-id"], key)
        await settled(gw.gateway)
        account = await store.get_account("team")
        mismatches = await store.reconcile()
    # a number JSON cannot hold (1e999) makes the event malformed: an upstream error
    assert resp.status in (200, 502), resp.body
    assert account is not None and account.held == 0
    assert 0 <= USD - account.balance <= round(row["credits_held"] * USD)
    assert row["credits_charged"] >= 0
    assert 0 <= row["prompt_tokens"] <= MAX_REPORTED_TOKENS
    assert 0 <= row["completion_tokens"] <= MAX_REPORTED_TOKENS
    assert row["cost"] is None or 0 <= row["cost"] <= 10_000
    docs = events(resp.body) if stream else [resp.json()]
    for wire in [d["usage"] for d in docs if isinstance(d, dict) and "usage" in d]:
        assert wire["prompt_tokens"] >= 0 and wire["completion_tokens"] >= 0
        assert wire["cost"] is None or wire["cost"] >= 0
    assert mismatches == []


async def test_a_cost_reported_through_an_accounts_own_connection_is_not_its_price(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    usage = b'{"prompt_tokens":10,"completion_tokens":50,"total_tokens":60,"cost":0.0}'
    fake.default = Reply.stream(*text_stream("byo")[:-1], usage_event(usage), DONE)
    admin_key = "admin-" + "x" * 40
    env = {"SLUICE_ADMIN_KEY": admin_key, "SLUICE_SECRET_KEY": "k" * 43 + "="}
    config = "[server]\nport = 0\nallow_private_upstreams = true\n"
    async with running_gateway(tmp_path, config, env=env) as gw:
        key = await metered_key(gw.gateway.store, "team", USD)
        spec = {
            "provider": "openai",
            "base_url": fake.base_url,
            "api_key": "sk-byo-provider-key-0123456789",
            "models": {"openai/gpt-4o-mini": "gpt-4o-mini"},
            "prices": {"openai/gpt-4o-mini": {"input": 1.0, "output": 3.0}},
        }
        body = json.dumps(spec).encode()
        saved = await exchange(
            gw.host,
            gw.port,
            (
                "PUT /admin/accounts/team/connections/conn_team HTTP/1.1\r\nHost: x\r\n"
                f"Authorization: Bearer {admin_key}\r\nContent-Length: {len(body)}\r\n\r\n"
            ).encode()
            + body,
        )
        request = chat(True, model="openai/gpt-4o-mini")
        resp = await exchange(gw.host, gw.port, post("/v1/chat/completions", request, key))
        await settled(gw.gateway)
        account = await gw.gateway.store.get_account("team")
    assert saved.status == 200, saved.body
    wire = events(resp.body)[-2]["usage"]
    assert (wire["cost"], wire["price_source"]) == (0.00016, "custom_provider")  # 10 x $1 + 50 x $3
    assert account is not None and USD - account.balance == 160_000


# -- 2. an upstream error never carries the provider key on -----------------------------

LEAKY_ERRORS = {
    "400-param": Reply.json(
        {"error": {"message": "bad", "code": "bad", "param": f"Bearer {UPSTREAM_KEY}"}}, status=400
    ),
    "400-code": Reply.json(
        {"error": {"message": "bad", "code": f"key {UPSTREAM_KEY} refused", "param": None}},
        status=400,
    ),
    "429-code": Reply.json({"error": {"message": "slow down", "code": UPSTREAM_KEY}}, status=429),
    "500-message": Reply.json({"error": {"message": f"Authorization: {UPSTREAM_KEY}"}}, status=500),
    "midstream": Reply.stream(
        *text_stream("partial")[:2],
        b'data: {"error": {"message": "auth %s", "code": "%s"}}\n\n'
        % (UPSTREAM_KEY.encode(), UPSTREAM_KEY.encode()),
    ),
}


@pytest.mark.parametrize("reply", list(LEAKY_ERRORS.values()), ids=list(LEAKY_ERRORS))
async def test_an_upstream_error_never_carries_the_provider_key(
    tmp_path: Path, fake: FakeUpstream, reply: Reply, caplog: pytest.LogCaptureFixture
) -> None:
    fake.queue(reply)
    caplog.set_level(logging.DEBUG)
    async with running_gateway(tmp_path, openai_connection_toml(fake.base_url)) as gw:
        assert gw.dev_key is not None
        key = gw.dev_key.key
        resp = await exchange(gw.host, gw.port, post("/v1/chat/completions", chat(True), key))
        row = await record(gw, resp.headers["x-request-id"], key)
    assert resp.status in (200, 400, 429, 502), resp.body
    assert fake.requests[0].headers["authorization"] == f"Bearer {UPSTREAM_KEY}"
    for secret in (UPSTREAM_KEY, UPSTREAM_KEY[3:]):
        assert secret not in resp.body.decode()
        assert secret not in json.dumps(row)
        assert secret not in caplog.text
    assert "[redacted]" in resp.body.decode() + json.dumps(row)


# -- 3. an endless upstream event is cut at its bound ------------------------------------


def endless_line(total: int, piece: int = 16 * 1024) -> list[Step]:
    return [b"data: " + b"x" * piece, *[b"x" * piece for _ in range(total // piece)]]


async def test_an_upstream_event_past_its_bound_ends_the_stream(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    fake.queue(Reply.stream(*text_stream("one ")[:2], *endless_line(8 * 1024 * 1024)))
    config = "[server]\nport = 0\nupstream_event_bytes = 65536\n"
    config += openai_connection_toml(fake.base_url)
    async with running_gateway(tmp_path, config) as gw:
        key = await metered_key(gw.gateway.store, "team", USD)
        resp = await exchange(gw.host, gw.port, post("/v1/chat/completions", chat(True), key))
        await asyncio.wait_for(fake.hung_up.wait(), 5)
        await settled(gw.gateway)
        account = await gw.gateway.store.get_account("team")
    assert resp.status == 200, resp.body
    *_, last = events(resp.body)
    assert last["error"]["code"] == "upstream_event_too_large"
    assert last["error"]["type"] == "upstream_error"
    assert b"[DONE]" not in resp.body
    # the gateway hung up before the 8 MiB were all sent (what the kernel buffers on
    # both sides took in the meantime depends on the machine: up to several MiB)
    assert fake.sent_bytes < 8 * 1024 * 1024
    assert account is not None and account.held == 0 and account.balance < USD


async def test_an_upstream_event_past_its_bound_before_any_content_is_a_502(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    fake.queue(Reply.stream(*endless_line(1024 * 1024)))
    config = "[server]\nport = 0\nupstream_event_bytes = 65536\n"
    config += openai_connection_toml(fake.base_url)
    async with running_gateway(tmp_path, config) as gw:
        assert gw.dev_key is not None
        body = chat(True)
        resp = await exchange(gw.host, gw.port, post("/v1/chat/completions", body, gw.dev_key.key))
    assert resp.status == 502
    assert resp.json()["error"]["code"] == "upstream_event_too_large"


# -- 4. hostile nesting, from a client or from an upstream -------------------------------


async def test_a_deeply_nested_body_is_a_400_naming_the_limit_and_logs_no_traceback(
    tmp_path: Path, fake: FakeUpstream, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    deep = b"[" * 100_000 + b"]" * 100_000
    body = b'{"model": "test/gpt-fake", "messages": [{"role": "user", "content": "x"}], '
    body += b'"metadata": ' + deep + b"}"
    async with running_gateway(tmp_path, openai_connection_toml(fake.base_url)) as gw:
        assert gw.dev_key is not None
        resp = await exchange(gw.host, gw.port, post("/v1/chat/completions", body, gw.dev_key.key))
    assert resp.status == 400
    error = resp.json()["error"]
    assert (error["type"], error["code"]) == ("invalid_request_error", "json_too_deep")
    assert "64 levels" in error["message"]
    assert "Traceback" not in caplog.text and "RecursionError" not in caplog.text
    assert fake.requests == []


@pytest.mark.parametrize("kind", ["stream", "whole", "error"])
async def test_a_deeply_nested_upstream_answer_is_malformed_not_a_crash(
    tmp_path: Path, fake: FakeUpstream, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    deep = b"[" * 100_000 + b"]" * 100_000
    stream = kind == "stream"
    if stream:
        event = chunk(content="hi").replace(b'"logprobs":null', b'"logprobs":' + deep)
        fake.queue(Reply.stream(chunk(role="assistant", content=""), event, DONE))
    else:
        doc = json.dumps(completion("hi")).encode().replace(b'"logprobs": null', b'"x": ' + deep)
        status = 500 if kind == "error" else 200
        fake.queue(Reply(status, {"content-type": "application/json"}, doc))
    async with running_gateway(tmp_path, openai_connection_toml(fake.base_url)) as gw:
        assert gw.dev_key is not None
        resp = await exchange(
            gw.host, gw.port, post("/v1/chat/completions", chat(stream), gw.dev_key.key)
        )
    assert resp.status == 502
    assert (
        resp.json()["error"]["code"]
        == {
            "stream": "upstream_malformed_event",
            "whole": "upstream_malformed_response",
            "error": "upstream_http_error",
        }[kind]
    )
    assert "Traceback" not in caplog.text and "RecursionError" not in caplog.text


# -- 5. a stream that trickles still ends ------------------------------------------------


async def test_a_trickling_stream_ends_at_the_total_deadline(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    trickle: list[Step] = []
    for _ in range(40):
        trickle += [Pause(0.1), chunk(content=".")]
    fake.queue(Reply.stream(*text_stream("start")[:2], *trickle, *text_stream()[1:]))
    config = openai_connection_toml(fake.base_url, timeouts="stall = 0.5, total = 1.0")
    async with running_gateway(tmp_path, config) as gw:
        assert gw.dev_key is not None
        loop = asyncio.get_running_loop()
        started = loop.time()
        resp = await exchange(
            gw.host, gw.port, post("/v1/chat/completions", chat(True), gw.dev_key.key)
        )
        took = loop.time() - started
        await asyncio.wait_for(fake.hung_up.wait(), 5)
        row = await record(gw, resp.headers["x-request-id"], gw.dev_key.key)
    *_, last = events(resp.body)
    assert (last["error"]["type"], last["error"]["code"]) == (
        "request_timeout",
        "deadline_exceeded",
    )
    assert b"[DONE]" not in resp.body
    assert 1.0 <= took < 3.0
    assert row["error_code"] == "deadline_exceeded"


async def test_a_total_deadline_before_the_first_event_fails_over(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    second = openai_default(FakeUpstream())
    await second.start()
    try:
        fake.queue(Reply.stream(*text_stream("late"), delay=2.0))
        config = openai_connection_toml(fake.base_url, timeouts="first_event = 5, total = 0.3")
        config += f"""
[[connections]]
id = "conn_second"
provider = "openai-compatible"
base_url = "{second.base_url}"

[[models]]
id = "test/gpt-fake"
providers = {{ conn_fake = "gpt-fake", conn_second = "gpt-fake-2" }}
"""
        async with running_gateway(tmp_path, config) as gw:
            assert gw.dev_key is not None
            key = gw.dev_key.key
            resp = await exchange(gw.host, gw.port, post("/v1/chat/completions", chat(True), key))
            row = await record(gw, resp.headers["x-request-id"], key)
    finally:
        await second.close()
    assert resp.status == 200
    assert events(resp.body)[0]["connection"] == "conn_second"
    assert [(a["connection"], a["code"]) for a in row["attempts"]] == [
        ("conn_fake", "deadline_exceeded"),
        ("conn_second", None),
    ]


# -- 11. indices reach the client canonical -----------------------------------------------


def call(index: int, call_id: str | None = None, name: str | None = None, args: str = "") -> Any:
    fragment: dict[str, Any] = {"index": index, "function": {"arguments": args}}
    if call_id is not None:
        fragment |= {"id": call_id, "type": "function"}
        fragment["function"]["name"] = name
    return fragment


async def test_tool_call_and_choice_indices_reach_the_sdk_canonical(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    fake.queue(
        Reply.stream(
            chunk(role="assistant", content=""),
            chunk(tool_calls=[call(0, "call_A", "first", '{"a":')]),
            chunk(tool_calls=[call(2, "call_Z", "second", '{"z":')]),
            chunk(tool_calls=[call(-1, "call_M", "third", "{}")]),
            chunk(content="not asked for", index=3),
            chunk(tool_calls=[call(0, args="1}"), call(2, args="2}")]),
            chunk(finish="tool_calls"),
            chunk(finish="stop", index=3),
            DONE,
        )
    )
    async with running_gateway(tmp_path, openai_connection_toml(fake.base_url)) as gw:
        assert gw.dev_key is not None
        client = AsyncOpenAI(base_url=gw.base_url + "/v1", api_key=gw.dev_key.key, max_retries=0)
        async with client.chat.completions.stream(
            model="test/gpt-fake", messages=[{"role": "user", "content": "call"}]
        ) as stream:
            async for _ in stream:
                pass
            final = await stream.get_final_completion()
        request_id = final.id
        row = await record(gw, request_id, gw.dev_key.key)
        await client.close()
    (choice,) = final.choices
    calls = choice.message.tool_calls or []
    assert [(c.id, c.function.name, c.function.arguments) for c in calls] == [
        ("call_A", "first", '{"a":1}'),
        ("call_Z", "second", '{"z":2}'),
        ("call_M", "third", "{}"),
    ]
    assert choice.finish_reason == "tool_calls"
    assert {"kind": "choice_dropped", "choice": 3, "upstream_index": None, "index": None} in row[
        "repairs"
    ]
    assert {"kind": "tool_call_renumbered", "choice": 0, "upstream_index": 2, "index": 1} in row[
        "repairs"
    ]


async def test_a_whole_answer_keeps_only_the_choices_asked_for(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    doc = completion("one")
    doc["choices"].append({**doc["choices"][0], "index": 5})
    fake.queue(Reply.json(doc))
    async with running_gateway(tmp_path, openai_connection_toml(fake.base_url)) as gw:
        assert gw.dev_key is not None
        key = gw.dev_key.key
        resp = await exchange(gw.host, gw.port, post("/v1/chat/completions", chat(False), key))
        row = await record(gw, resp.headers["x-request-id"], key)
    assert [c["index"] for c in resp.json()["choices"]] == [0]
    assert row["repairs"] == [
        {"kind": "choice_dropped", "choice": 5, "upstream_index": None, "index": None}
    ]
