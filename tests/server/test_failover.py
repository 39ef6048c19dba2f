"""Fault injection: what the client sees, and which attempts were made (docs/api.md#errors,
docs/api.md#models-and-routes).

Two fake upstreams serve the same model: `conn_a` (primary) and, as the route's second
target, `conn_b` (standby_a). Each test breaks the primary in one way.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import struct
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.support.fake_openai import chunk, completion, text_stream
from tests.support.fake_upstream import Cut, FakeUpstream, Pause, Reply, Step
from tests.support.gateway import running_gateway
from tests.support.raw_http import RawResponse, exchange, get, post


@pytest.fixture
async def pair() -> AsyncIterator[tuple[FakeUpstream, FakeUpstream]]:
    a, b = FakeUpstream(), FakeUpstream()
    await a.start()
    await b.start()
    b.default = Reply.stream(*text_stream("from", " b"))
    try:
        yield a, b
    finally:
        await a.close()
        await b.close()


def config(a: FakeUpstream, b: FakeUpstream, timeouts: str = "") -> str:
    extra = f"timeouts = {{ {timeouts} }}\n" if timeouts else ""
    return f"""
[server]
port = 0
sse_keepalive_interval = 0

[routing]
breaker_failures = 3
breaker_cooldown = 30

[[connections]]
id = "conn_a"
provider = "openai-compatible"
base_url = "{a.base_url}"
{extra}
[[connections]]
id = "conn_b"
provider = "openai-compatible"
base_url = "{b.base_url}"
{extra}
[[models]]
id = "test/a"
providers = {{ conn_a = "model-a" }}

[[models]]
id = "test/b"
providers = {{ conn_b = "model-b" }}

[[routes]]
name = "bot"
chain = [ {{ model = "test/a" }}, {{ model = "test/b" }} ]
"""


BODY = json.dumps(
    {"model": "bot", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
).encode()


def events(resp: RawResponse) -> list[dict[str, object]]:
    return [
        json.loads(e.removeprefix(b"data: "))
        for e in resp.body[:-2].split(b"\n\n")
        if e.startswith(b"data: {")
    ]


def served_by(resp: RawResponse) -> tuple[object, object, object, object]:
    first = events(resp)[0]
    return first["route"], first["route_name"], first["connection"], first["model"]


def attempts(caplog: pytest.LogCaptureFixture, request_id: str) -> list[str]:
    (line,) = [
        r.getMessage()
        for r in caplog.records
        if r.name == "sluice.access" and r.getMessage().startswith(request_id)
    ]
    return line.split()[4:]


async def call(
    tmp_path: Path, a: FakeUpstream, b: FakeUpstream, *, timeouts: str = "", times: int = 1
) -> list[RawResponse]:
    out = []
    async with running_gateway(tmp_path, config(a, b, timeouts)) as gw:
        assert gw.dev_key is not None
        for _ in range(times):
            out.append(
                await exchange(gw.host, gw.port, post("/v1/chat/completions", BODY, gw.dev_key.key))
            )
    return out


FAILOVER_CASES: dict[str, tuple[Reply, str, str]] = {
    "reset-before-first-byte": (Reply.reset(), "upstream_error", ""),
    "http-500": (Reply.json({"error": {"message": "boom"}}, status=500), "upstream_error", ""),
    "http-503": (Reply.json({"error": {"message": "busy"}}, status=503), "service_unavailable", ""),
    "http-408": (Reply.json({"error": {"message": "slow"}}, status=408), "request_timeout", ""),
    "stall-before-first-event": (
        Reply.stream(chunk(role="assistant", content=""), Pause(5)),
        "request_timeout",
        "first_event = 0.3",
    ),
    "head-never-comes": (Reply.stream(delay=5), "request_timeout", "first_event = 0.3"),
    "malformed-json-first": (Reply.stream(b"data: {not json}\n\n"), "upstream_error", ""),
    "ends-before-content": (
        Reply.stream(chunk(role="assistant", content=""), Cut()),
        "upstream_error",
        "",
    ),
    "error-event-first": (
        Reply.stream(b'data: {"error": {"message": "overloaded"}}\n\n'),
        "upstream_error",
        "",
    ),
}


@pytest.mark.parametrize("case", sorted(FAILOVER_CASES))
async def test_failure_before_the_first_event_never_reaches_the_client(
    tmp_path: Path,
    pair: tuple[FakeUpstream, FakeUpstream],
    caplog: pytest.LogCaptureFixture,
    case: str,
) -> None:
    caplog.set_level(logging.INFO, "sluice.access")
    a, b = pair
    reply, outcome, timeouts = FAILOVER_CASES[case]
    a.queue(reply)
    (resp,) = await call(tmp_path, a, b, timeouts=timeouts)
    assert resp.status == 200
    assert served_by(resp) == ("standby_a", "bot", "conn_b", "test/b")
    assert resp.body.endswith(b"data: [DONE]\n\n")
    assert (
        "".join(
            str(e["choices"][0]["delta"].get("content", ""))  # type: ignore[index]
            for e in events(resp)
            if e["choices"]
        )
        == "from b"
    )
    assert attempts(caplog, resp.headers["x-request-id"]) == [
        f"primary:conn_a:{outcome}",
        "standby_a:conn_b:served",
    ]


async def test_429_retry_after_fails_over_and_cools_the_connection(
    tmp_path: Path, pair: tuple[FakeUpstream, FakeUpstream], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "sluice.access")
    a, b = pair
    a.queue(Reply.json({"error": {"message": "slow down"}}, status=429, **{"retry-after": "60"}))
    first, second = await call(tmp_path, a, b, times=2)
    assert served_by(first)[2] == served_by(second)[2] == "conn_b"
    assert len(a.requests) == 1  # the second request did not knock on conn_a
    assert attempts(caplog, second.headers["x-request-id"]) == [
        "primary:conn_a:skipped",
        "standby_a:conn_b:served",
    ]


async def test_400_is_not_failed_over(
    tmp_path: Path, pair: tuple[FakeUpstream, FakeUpstream]
) -> None:
    a, b = pair
    a.queue(
        Reply.json(
            {
                "error": {
                    "message": "bad max_tokens",
                    "param": "max_tokens",
                    "code": "invalid_value",
                }
            },
            status=400,
        )
    )
    (resp,) = await call(tmp_path, a, b)
    assert resp.status == 400
    assert resp.json()["error"] == {
        "message": "bad max_tokens",
        "type": "invalid_request_error",
        "code": "invalid_value",
        "param": "max_tokens",
    }
    assert b.requests == []


async def test_when_nothing_can_serve_the_last_meaningful_error_is_returned(
    tmp_path: Path, pair: tuple[FakeUpstream, FakeUpstream], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "sluice.access")
    a, b = pair
    a.queue(Reply.json({"error": {"message": "boom"}}, status=500))
    b.queue(Reply.json({"error": {"message": "busy"}}, status=503, **{"retry-after": "2"}))
    (resp,) = await call(tmp_path, a, b)
    assert resp.status == 503
    assert resp.json()["error"]["type"] == "service_unavailable"
    assert resp.headers["retry-after"] == "2"
    assert attempts(caplog, resp.headers["x-request-id"]) == [
        "primary:conn_a:upstream_error",
        "standby_a:conn_b:service_unavailable",
    ]


async def test_breaker_opens_after_repeated_failures_then_reports_cooling_down(
    tmp_path: Path, pair: tuple[FakeUpstream, FakeUpstream]
) -> None:
    a, b = pair
    for fake in (a, b):
        fake.default = Reply.json({"error": {"message": "down"}}, status=502)
    responses = await call(tmp_path, a, b, times=4)
    assert [r.status for r in responses] == [502, 502, 502, 503]
    assert responses[3].json()["error"]["code"] == "connections_cooling_down"
    assert int(responses[3].headers["retry-after"]) > 0
    assert len(a.requests) == len(b.requests) == 3


MID_STREAM: dict[str, tuple[list[Step], str, str, str]] = {
    "reset-after-three-chunks": ([Cut()], "upstream_error", "upstream_disconnected", ""),
    "stall-after-three-chunks": ([Pause(5)], "request_timeout", "stream_stalled", "stall = 0.3"),
    "malformed-json-after-content": (
        [b"data: {oops\n\n"],
        "upstream_error",
        "upstream_malformed_event",
        "",
    ),
}


@pytest.mark.parametrize("case", sorted(MID_STREAM))
async def test_failure_after_content_ends_with_an_error_event(
    tmp_path: Path, pair: tuple[FakeUpstream, FakeUpstream], case: str
) -> None:
    a, b = pair
    tail, type_, code, timeouts = MID_STREAM[case]
    a.queue(
        Reply.stream(
            chunk(role="assistant", content=""),
            chunk(content="one"),
            chunk(content=" two"),
            chunk(content=" three"),
            *tail,
        )
    )
    (resp,) = await call(tmp_path, a, b, timeouts=timeouts)
    assert resp.status == 200
    assert b"[DONE]" not in resp.body
    *content, last = events(resp)
    assert last == {
        "error": {
            "message": last["error"]["message"],  # type: ignore[index]
            "type": type_,
            "code": code,
        }
    }
    assert [e["connection"] for e in content] == ["conn_a"] * len(content)
    assert b.requests == []  # no re-routing once tokens flowed


async def test_an_event_split_at_every_byte(
    tmp_path: Path, pair: tuple[FakeUpstream, FakeUpstream]
) -> None:
    a, b = pair
    whole = b"".join(s for s in text_stream("split", " every", " byte") if isinstance(s, bytes))
    a.queue(Reply.stream(*[whole[i : i + 1] for i in range(len(whole))]))
    (resp,) = await call(tmp_path, a, b)
    text = "".join(
        str(e["choices"][0]["delta"].get("content", ""))  # type: ignore[index]
        for e in events(resp)
        if e["choices"]
    )
    assert text == "split every byte" and resp.body.endswith(b"data: [DONE]\n\n")
    assert served_by(resp)[2] == "conn_a"


async def test_keep_alive_comments_while_waiting_then_failover(
    tmp_path: Path, pair: tuple[FakeUpstream, FakeUpstream]
) -> None:
    a, b = pair
    a.queue(Reply.json({"error": {"message": "late failure"}}, status=500))
    a.replies[0].delay = 0.6
    cfg = config(a, b).replace("sse_keepalive_interval = 0", "sse_keepalive_interval = 0.1")
    async with running_gateway(tmp_path, cfg) as gw:
        assert gw.dev_key is not None
        resp = await exchange(gw.host, gw.port, post("/v1/chat/completions", BODY, gw.dev_key.key))
    assert resp.status == 200
    head = resp.body.partition(b"data: ")[0]
    assert head.count(b": keep-alive\n\n") >= 2 and head.replace(b": keep-alive\n\n", b"") == b""
    assert served_by(resp)[2] == "conn_b"
    assert resp.body.endswith(b"data: [DONE]\n\n")


async def test_keep_alive_then_total_failure_is_an_error_event(
    tmp_path: Path, pair: tuple[FakeUpstream, FakeUpstream]
) -> None:
    a, b = pair
    for fake in (a, b):
        fake.queue(Reply.json({"error": {"message": "down"}}, status=502))
        fake.replies[0].delay = 0.25
    cfg = config(a, b).replace("sse_keepalive_interval = 0", "sse_keepalive_interval = 0.1")
    async with running_gateway(tmp_path, cfg) as gw:
        assert gw.dev_key is not None
        resp = await exchange(gw.host, gw.port, post("/v1/chat/completions", BODY, gw.dev_key.key))
    assert resp.status == 200  # committed by the first keep-alive
    assert resp.body.startswith(b": keep-alive\n\n")
    assert b"[DONE]" not in resp.body
    assert events(resp)[-1]["error"]["type"] == "upstream_error"  # type: ignore[index]


async def test_weighted_connections_share_the_traffic(tmp_path: Path) -> None:
    fakes = [FakeUpstream(), FakeUpstream()]
    for fake in fakes:
        await fake.start()
        fake.default = Reply.stream(*text_stream("x"))
    try:
        cfg = f"""
[server]
port = 0
[[connections]]
id = "conn_light"
provider = "openai-compatible"
base_url = "{fakes[0].base_url}"
weight = 1
[[connections]]
id = "conn_heavy"
provider = "openai-compatible"
base_url = "{fakes[1].base_url}"
weight = 3
[[models]]
id = "test/w"
balance = "weighted"
providers = {{ openai-compatible = "w" }}
"""
        body = json.dumps(
            {"model": "test/w", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
        ).encode()
        async with running_gateway(tmp_path, cfg) as gw:
            assert gw.dev_key is not None
            request = post("/v1/chat/completions", body, gw.dev_key.key)
            await asyncio.gather(*[exchange(gw.host, gw.port, request) for _ in range(200)])
    finally:
        for fake in fakes:
            await fake.close()
    light, heavy = len(fakes[0].requests), len(fakes[1].requests)
    assert light + heavy == 200
    assert 25 <= light <= 75  # expected 50 of 200 (binomial sd ~6)


async def test_metrics_show_attempts_breaker_states_and_first_tokens(
    tmp_path: Path, pair: tuple[FakeUpstream, FakeUpstream]
) -> None:
    a, b = pair
    a.default = Reply.json({"error": {"message": "down"}}, status=502)
    admin = "admin-" + "m" * 40
    async with running_gateway(tmp_path, config(a, b), env={"SLUICE_ADMIN_KEY": admin}) as gw:
        assert gw.dev_key is not None
        for _ in range(4):
            await exchange(gw.host, gw.port, post("/v1/chat/completions", BODY, gw.dev_key.key))
        unauthorized = await exchange(gw.host, gw.port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        resp = await exchange(
            gw.host,
            gw.port,
            f"GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {admin}\r\n\r\n".encode(),
        )
    assert unauthorized.status == 401
    text = resp.body.decode()
    assert resp.headers["content-type"].startswith("text/plain")
    assert (
        'sluice_upstream_attempts_total{connection="conn_a",outcome="upstream_error"} 3.0' in text
    )
    assert 'sluice_upstream_attempts_total{connection="conn_a",outcome="skipped"} 1.0' in text
    assert 'sluice_upstream_attempts_total{connection="conn_b",outcome="served"} 4.0' in text
    assert 'sluice_connection_breaker_state{connection="conn_a"} 2.0' in text
    assert 'sluice_requests_total{path="/v1/chat/completions",status="200"} 4.0' in text
    assert "sluice_time_to_first_token_seconds_count 4.0" in text
    assert "sluice_streams_in_flight 0.0" in text


async def test_request_level_models_list_is_tried_after_the_model(
    tmp_path: Path, pair: tuple[FakeUpstream, FakeUpstream]
) -> None:
    a, b = pair
    a.queue(Reply.json({"error": {"message": "boom"}}, status=500))
    body = json.dumps(
        {
            "model": "test/a",
            "models": ["test/b"],
            "stream": True,
            "messages": [{"role": "user", "content": "hi"}],
        }
    ).encode()
    async with running_gateway(tmp_path, config(a, b)) as gw:
        assert gw.dev_key is not None
        resp = await exchange(gw.host, gw.port, post("/v1/chat/completions", body, gw.dev_key.key))
    assert served_by(resp) == ("standby_a", None, "conn_b", "test/b")


async def test_model_level_fallbacks_from_the_catalog(
    tmp_path: Path, pair: tuple[FakeUpstream, FakeUpstream]
) -> None:
    a, b = pair
    a.queue(Reply.reset())
    cfg = config(a, b).replace(
        'providers = { conn_a = "model-a" }',
        'providers = { conn_a = "model-a" }\nfallbacks = ["test/b"]',
    )
    body = json.dumps(
        {"model": "test/a", "stream": False, "messages": [{"role": "user", "content": "hi"}]}
    ).encode()
    b.queue(
        Reply.json(
            {
                "id": "x",
                "object": "chat.completion",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": "fallback"},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1},
            }
        )
    )
    async with running_gateway(tmp_path, cfg) as gw:
        assert gw.dev_key is not None
        resp = await exchange(gw.host, gw.port, post("/v1/chat/completions", body, gw.dev_key.key))
    doc = resp.json()
    assert (doc["route"], doc["route_name"], doc["connection"], doc["model"]) == (
        "standby_a",
        None,
        "conn_b",
        "test/b",
    )
    assert doc["choices"][0]["message"]["content"] == "fallback"


async def test_a_pooled_connection_dropped_after_the_request_reaches_it_once(
    tmp_path: Path, pair: tuple[FakeUpstream, FakeUpstream], caplog: pytest.LogCaptureFixture
) -> None:
    """The upstream read the request, then closed the reused connection: it may have
    acted on it, so it is not sent to it again; the standby serves (two reaches, not
    three)."""
    caplog.set_level(logging.INFO, "sluice.access")
    a, b = pair
    a.queue(Reply.stream(*text_stream("from", " a")), Reply.reset())
    first, second = await call(tmp_path, a, b, times=2)
    assert served_by(first)[2] == "conn_a" and served_by(second)[2] == "conn_b"
    assert len(a.requests) == 2 and len(b.requests) == 1
    assert attempts(caplog, second.headers["x-request-id"]) == [
        "primary:conn_a:upstream_error",
        "standby_a:conn_b:served",
    ]


class ResettingUpstream:
    """A raw OpenAI upstream: answers whole completions, and resets the second request
    on its first connection as soon as its head is in (the body still being written)."""

    def __init__(self) -> None:
        self.connections = 0
        self.heads = 0
        self.answered = 0

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        index = self.connections
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                self.heads += 1
                if index == 0 and self.heads == 2:
                    sock = writer.get_extra_info("socket")
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    writer.transport.abort()
                    return
                length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
                await reader.readexactly(length)
                self.answered += 1
                body = json.dumps(completion("ok")).encode()
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                    b"content-length: %d\r\n\r\n%s" % (len(body), body)
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            return
        finally:
            writer.close()


@pytest.mark.parametrize("breaker_failures", [1, 5])
async def test_a_request_that_never_left_is_resent_fresh_as_an_attempt_of_its_own(
    tmp_path: Path, breaker_failures: int
) -> None:
    """Reset while its 12 MB body was still being written: certainly not acted on, so
    it goes once more on a new connection. That try is an attempt in the request log
    and a failure for the breaker (with a threshold of 1 the breaker opens on it)."""
    upstream = ResettingUpstream()
    server = await asyncio.start_server(upstream.serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    config = f"""
[server]
port = 0
[routing]
breaker_failures = {breaker_failures}
[[connections]]
id = "conn_raw"
provider = "openai-compatible"
base_url = "http://127.0.0.1:{port}/v1"
[[models]]
id = "test/raw"
providers = {{ conn_raw = "raw" }}
"""
    small = json.dumps({"model": "test/raw", "messages": [{"role": "user", "content": "hi"}]})
    big = small.replace('"hi"', json.dumps("x" * (12 << 20)))
    async with server, running_gateway(tmp_path, config) as gw:
        assert gw.dev_key is not None
        key = gw.dev_key.key
        warm = await exchange(gw.host, gw.port, post("/v1/chat/completions", small.encode(), key))
        resp = await exchange(gw.host, gw.port, post("/v1/chat/completions", big.encode(), key))
        row = (
            await exchange(
                gw.host, gw.port, get(f"/v1/requests/{resp.headers['x-request-id']}", key)
            )
        ).json()
    assert warm.status == 200
    tries = [(a["connection"], a["outcome"], a["code"]) for a in row["attempts"]]
    assert tries[0] == ("conn_raw", "upstream_error", "upstream_connection_closed")
    if breaker_failures == 1:
        assert resp.status == 502 and tries[1:] == [("conn_raw", "skipped", None)]
        assert upstream.answered == 1
    else:
        assert resp.status == 200 and tries[1:] == [("conn_raw", "served", None)]
        assert (upstream.connections, upstream.heads, upstream.answered) == (2, 3, 2)
