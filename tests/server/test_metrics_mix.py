"""``/metrics`` after a known mix of requests, parsed with prometheus_client's parser:
every new counter equals the mix exactly."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from sluice.server.lifecycle import RunningGateway
from tests.server.test_admin import ADMIN, ENV
from tests.support.accounts import metered_key
from tests.support.fake_openai import chunk, text_stream
from tests.support.fake_upstream import FakeUpstream, Reply, WaitFor
from tests.support.gateway import running_gateway
from tests.support.raw_http import RawClient, exchange, get, post

HI = [{"role": "user", "content": "hi"}]


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[sample.name, tuple(sorted(sample.labels.items()))] = sample.value
    return out


async def test_the_counters_equal_the_mix(tmp_path: Path) -> None:
    config = "[server]\nport = 0\n[limits]\nkey = { requests = 3 }\n"
    async with running_gateway(tmp_path, config, env=ENV) as gw:
        key = await metered_key(gw.gateway.store, "team", 10**9)
        poor = await metered_key(gw.gateway.store, "poor", 1)
        chat = json.dumps({"model": "sluice/demo", "max_tokens": 5, "messages": HI}).encode()
        streamed = json.dumps(
            {"model": "sluice/demo", "max_tokens": 5, "stream": True, "messages": HI}
        ).encode()
        messages = json.dumps({"model": "sluice/demo", "max_tokens": 5, "messages": HI}).encode()
        ids = []
        for path, body in (
            ("/v1/chat/completions", chat),
            ("/v1/chat/completions", streamed),
            ("/v1/messages", messages),
        ):
            answer = await exchange(gw.host, gw.port, post(path, body, key))
            assert answer.status == 200, answer.body
            ids.append(answer.headers["x-request-id"])
        limited = await exchange(gw.host, gw.port, post("/v1/chat/completions", chat, key))
        broke = await exchange(gw.host, gw.port, post("/v1/chat/completions", chat, poor))
        # the admin listing: the key has spent its three calls this minute
        listing = (
            await exchange(gw.host, gw.port, get("/admin/requests?account=team", ADMIN))
        ).json()
        rows = [r for r in listing["data"] if r["id"] in ids]
        assert len(rows) == 3
        text = (await exchange(gw.host, gw.port, get("/metrics", ADMIN))).body.decode()
    assert (limited.status, broke.status) == (429, 402)
    found = samples(text)
    demo = (("connection", "conn_demo"), ("model", "sluice/demo"), ("provider", "demo"))

    def served(door: str, outcome: str) -> float:
        labels = tuple(sorted((*demo, ("front_door", door), ("outcome", outcome))))
        return found.get(("sluice_model_requests_total", labels), 0.0)

    assert served("chat", "truncated") == 2 and served("messages", "truncated") == 1
    for kind, field in (("prompt", "prompt_tokens"), ("completion", "completion_tokens")):
        labels = (("kind", kind), ("model", "sluice/demo"))
        assert found["sluice_tokens_total", labels] == sum(r[field] for r in rows)
    cost = found["sluice_cost_usd_total", (("model", "sluice/demo"),)]
    assert abs(cost - sum(r["cost"] for r in rows)) < 1e-12
    assert found["sluice_refusals_total", (("reason", "rate_limit"),)] == 1
    assert found["sluice_refusals_total", (("reason", "budget"),)] == 1
    chat_count = tuple(sorted((*demo, ("front_door", "chat"))))
    assert found["sluice_request_duration_seconds_count", chat_count] == 2
    assert found["sluice_served_time_to_first_token_seconds_count", chat_count] == 2
    streamed_rates = sum(1 for r in rows if r["tokens_per_second"] is not None)
    rates = sum(v for (name, _), v in found.items() if name == "sluice_tokens_per_second_count")
    assert rates == streamed_rates == 1  # only the streamed answer has a rate


SCRAPE = "metrics_listen = '127.0.0.1:0'\nsse_keepalive_interval = 0\n"
Found = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def fleet(a: FakeUpstream, b: FakeUpstream) -> str:
    """Two fake upstreams behind route ``bot`` (``conn_a`` first), an input guardrail."""
    connections = "".join(
        f'[[connections]]\nid = "{conn}"\nprovider = "openai-compatible"\nbase_url = "{url}"\n'
        f'[[models]]\nid = "test/{name}"\nproviders = {{ {conn} = "model-{name}" }}\n'
        "price = { input = 2.0, output = 8.0 }\n"
        for conn, name, url in (("conn_a", "a", a.base_url), ("conn_b", "b", b.base_url))
    )
    return (
        f"[server]\nport = 0\n{SCRAPE}[routing]\nbreaker_failures = 2\nbreaker_cooldown = 60\n"
        f"{connections}"
        '[[routes]]\nname = "bot"\nchain = [ { model = "test/a" }, { model = "test/b" } ]\n'
        '[[guardrails]]\nname = "no-secrets"\nstage = "input"\nkind = "keywords"\n'
        'words = ["password"]\n'
    )


async def scraped(gw: RunningGateway) -> Found:
    assert gw.scrape is not None
    host, port = gw.scrape.address
    return samples((await exchange(host, port, get("/metrics", None))).body.decode())


async def settled(gw: RunningGateway) -> Found:
    """The scrape once no request runs and every hold is released (settling is
    written behind the response)."""
    async with asyncio.timeout(5):
        while True:
            await gw.gateway.writer.flush()
            found = await scraped(gw)
            if found["sluice_requests_in_flight", ()] == found["sluice_holds_open", ()] == 0:
                return found
            await asyncio.sleep(0.01)


def streamed_body(model: str, content: str = "hi") -> bytes:
    messages = [{"role": "user", "content": content}]
    return json.dumps({"model": model, "stream": True, "messages": messages}).encode()


async def open_stream(
    gw: RunningGateway, key: str, reply: Reply, fake: FakeUpstream, model: str = "test/b"
) -> tuple[RawClient, str]:
    """A stream read up to its first content: the client, still reading, and the
    request id."""
    fake.queue(reply)
    client = await RawClient.connect(gw.host, gw.port)
    await client.send(post("/v1/chat/completions", streamed_body(model), key))
    status, headers = await client.read_head()
    assert status == 200
    seen = b""
    while b"token0" not in seen:
        piece = await client.read_chunk()
        assert piece is not None
        seen += piece
    return client, headers["x-request-id"]


def paused(release: asyncio.Event) -> Reply:
    return Reply.stream(
        chunk(role="assistant", content=""),
        chunk(content="token0 "),
        WaitFor(release),
        *text_stream("end")[1:],
    )


async def test_failovers_cancellations_blocks_and_what_is_open_equal_the_mix(
    tmp_path: Path,
) -> None:
    a, b = FakeUpstream(), FakeUpstream()
    await a.start()
    await b.start()
    a.default = Reply.json({"error": {"message": "down"}}, status=502)
    b.default = Reply.stream(*text_stream("from", " b"))
    try:
        async with running_gateway(tmp_path, fleet(a, b)) as gw:
            store = gw.gateway.store
            key = await metered_key(store, "team", 10**9)
            for _ in range(2):  # conn_a fails twice: both fail over, its circuit opens
                answer = await exchange(
                    gw.host, gw.port, post("/v1/chat/completions", streamed_body("bot"), key)
                )
                assert answer.status == 200
            secret = streamed_body("test/b", "my password is")
            blocked = await exchange(gw.host, gw.port, post("/v1/chat/completions", secret, key))
            before = await settled(gw)
            release = asyncio.Event()
            client, request_id = await open_stream(gw, key, paused(release), b)
            during = await scraped(gw)
            live = await exchange(gw.host, gw.port, get(f"/v1/requests/{request_id}", key))
            release.set()
            while await client.read_chunk() is not None:
                pass
            await client.close()
            after = await settled(gw)
            client, _ = await open_stream(gw, key, paused(asyncio.Event()), b)
            await client.close()  # the client leaves mid-stream: cancelled
            async with asyncio.timeout(5):
                while (await settled(gw)).get(("sluice_cancellations_total", ()), 0) == 0:
                    await asyncio.sleep(0.01)
            final = await settled(gw)
    finally:
        await a.close()
        await b.close()
    assert blocked.status == 400
    assert before["sluice_holds_open", ()] == 0 and before["sluice_credits_held_usd", ()] == 0
    assert before["sluice_connection_breaker_state", (("connection", "conn_a"),)] == 2
    assert ("sluice_connection_breaker_state", (("connection", "conn_b"),)) not in before
    assert during["sluice_streams_in_flight", ()] == during["sluice_requests_in_flight", ()] == 1
    assert during["sluice_holds_open", ()] == 1
    held = live.json()["credits_held"]
    assert live.json()["status"] == "in_progress" and held > 0
    assert during["sluice_credits_held_usd", ()] == held
    assert after["sluice_streams_in_flight", ()] == after["sluice_credits_held_usd", ()] == 0
    failovers = {k: v for k, v in final.items() if k[0] == "sluice_failovers_total"}
    assert failovers == {("sluice_failovers_total", (("connection", "conn_a"),)): 2}
    assert final["sluice_cancellations_total", ()] == 1
    assert final["sluice_drains_total", ()] == 0
    blocks = {k: v for k, v in final.items() if k[0] == "sluice_guardrail_blocks_total"}
    labels = (("guardrail", "no-secrets"), ("stage", "input"))
    assert blocks == {("sluice_guardrail_blocks_total", labels): 1}
    assert final["sluice_refusals_total", (("reason", "guardrail"),)] == 1
    assert final["sluice_streams_in_flight", ()] == final["sluice_drains_in_flight", ()] == 0
