"""Live reload in a real gateway (issue 12): ``POST /admin/reload`` needs the admin key,
applies limits, guardrails and prices from the next request on, refuses a bad file
naming the problem (the running config still serving) and reports what needs a
restart. ``SIGHUP`` on a real process: tests/cli/test_serve_reload.py."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from sluice.config import parse_config
from sluice.core.usage import Price, TokenUsage
from sluice.metering.pricing import cost_pico
from sluice.server.lifecycle import RunningGateway
from sluice.server.reload import effective
from sluice.settings import Settings, build_settings
from tests.support.fake_openai import text_stream
from tests.support.fake_upstream import FakeUpstream, Reply, WaitFor
from tests.support.gateway import openai_connection_toml, running_gateway
from tests.support.raw_http import RawClient, RawResponse, exchange, get, post

ADMIN = "admin-" + "r" * 40
ENV = {"SLUICE_ADMIN_KEY": ADMIN}
USAGE = {"prompt_tokens": 1000, "completion_tokens": 500, "total_tokens": 1500}
KEYWORDS = """
[[guardrails]]
name = "no-forbidden"
stage = "input"
kind = "keywords"
words = ["forbidden"]
"""


async def reload(
    gw: RunningGateway, token: str | None = ADMIN, method: str = "POST"
) -> RawResponse:
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    request = f"{method} /admin/reload HTTP/1.1\r\nHost: x\r\n{auth}Content-Length: 0\r\n\r\n"
    return await exchange(gw.host, gw.port, request.encode())


async def chat(gw: RunningGateway, text: str = "hi", model: str = "test/gpt-fake") -> RawResponse:
    assert gw.dev_key is not None
    doc = {
        "model": model,
        "stream": True,
        "stream_options": {"include_usage": True},
        "messages": [{"role": "user", "content": text}],
    }
    body = json.dumps(doc).encode()
    return await exchange(gw.host, gw.port, post("/v1/chat/completions", body, gw.dev_key.key))


async def models(gw: RunningGateway) -> dict[str, Any]:
    assert gw.dev_key is not None
    listed = (await exchange(gw.host, gw.port, get("/v1/models", gw.dev_key.key))).json()
    return {m["id"]: m for m in listed["data"]}


def usage_cost(resp: RawResponse) -> float:
    events = [e.removeprefix(b"data: ") for e in resp.body.split(b"\n\n") if e]
    last = json.loads(events[-2])  # the usage chunk, before [DONE]
    cost: float = last["usage"]["cost"]
    return cost


async def rewrite(path: Path, text: str) -> None:
    await asyncio.to_thread(path.write_text, "[server]\nport = 0\n" + text)


async def test_reload_needs_the_admin_key(tmp_path: Path) -> None:
    path = tmp_path / "sluice.toml"
    async with running_gateway(tmp_path / "off", config_path=tmp_path / "off.toml") as gw:
        off = await reload(gw)
    async with running_gateway(tmp_path / "on", env=ENV, config_path=path) as gw:
        assert gw.dev_key is not None
        anonymous = await reload(gw, None)
        api_key = await reload(gw, gw.dev_key.key)
        wrong = await reload(gw, "nope" * 10)
        get_it = await reload(gw, method="GET")
        ok = await reload(gw)
    async with running_gateway(tmp_path / "embedded", env=ENV) as gw:
        sourceless = await reload(gw)
    assert off.status == 404  # no admin key: no admin API
    for refused in (anonymous, api_key, wrong):
        assert refused.status == 401
        assert refused.json()["error"]["code"] == "invalid_admin_key"
    assert get_it.status == 405
    assert ok.status == 200
    assert ok.json() == {
        "changed": [],
        "needs_restart": [],
        "connections": ["conn_demo"],
        "models": [],
        "routes": [],
        "guardrails": [],
    }
    assert sourceless.status == 422
    assert "without a config source" in sourceless.json()["error"]["message"]


BAD_FILES = [
    ("[[connections]\nid = 'x'", "at the end of an array declaration", "toml"),
    ("[[routes]]\nname = 'r'\nchian = []", "unknown field `chian`", "typo"),
    (
        "[[routes]]\nname = 'r'\nchain = [ { model = 'test/nowhere' } ]",
        "route 'r': unknown model 'test/nowhere'",
        "route",
    ),
    (KEYWORDS.replace('words = ["forbidden"]', ""), "kind 'keywords' needs `words`", "guardrail"),
    (
        "[[connections]]\nid = 'conn_fake'\nprovider = 'openai-compatible'\n"
        "base_url = 'http://127.0.0.1:9/v1'",
        "duplicate connection ids: conn_fake",
        "duplicate",
    ),
    (
        "[[connections]]\nid = 'conn_local'\nprovider = 'openai-compatible'\n"
        "base_url = 'http://127.0.0.1:9/v1'\napi_key_env = 'SLUICE_TEST_UNSET_KEY'",
        "connection 'conn_local': environment variable SLUICE_TEST_UNSET_KEY is not set",
        "unset-key-variable",
    ),
]


async def test_a_bad_file_is_refused_naming_the_problem_and_the_old_config_serves(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    path = tmp_path / "sluice.toml"
    config = openai_connection_toml(fake.base_url)
    async with running_gateway(tmp_path, config, env=ENV, config_path=path) as gw:
        before = await models(gw)
        answers = []
        for text, _, _ in BAD_FILES:
            await rewrite(path, config + text)
            answers.append(await reload(gw))
        await asyncio.to_thread(path.unlink)
        answers.append(await reload(gw))
        after = await models(gw)
        served = await chat(gw)
    for (_, problem, case), answer in zip(BAD_FILES, answers[:-1], strict=True):
        error = answer.json()["error"]
        assert answer.status == 422, case
        assert error["code"] == "invalid_config", case
        assert problem in error["message"], (case, error["message"])
        assert "the running one is kept" in error["message"]
    assert "cannot read config file" in answers[-1].json()["error"]["message"]
    assert after == before
    assert served.status == 200 and served.body.endswith(b"data: [DONE]\n\n")


async def test_limits_guardrails_and_prices_change_on_the_next_request(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    fake.default = Reply.stream(*text_stream("ok", usage=USAGE))
    path = tmp_path / "sluice.toml"
    config = openai_connection_toml(fake.base_url)
    async with running_gateway(tmp_path, config, env=ENV, config_path=path) as gw:
        old_price = (await models(gw))["test/gpt-fake"]["pricing"]
        first = await chat(gw, "forbidden words")
        dearer = config.replace("input = 2.0, output = 8.0", "input = 20.0, output = 80.0")
        limits = "\n[limits]\nkey = { requests = 3, window = 60 }\n"  # models, 2 chats
        await rewrite(path, dearer + limits + KEYWORDS)
        answer = await reload(gw)
        new_price = (await models(gw))["test/gpt-fake"]["pricing"]
        blocked = await chat(gw, "forbidden words")
        priced = await chat(gw)
        limited = await chat(gw)
    assert first.status == 200 and "x-ratelimit-limit-requests" not in first.headers
    assert answer.status == 200
    assert answer.json()["changed"] == ["models", "guardrails", "limits"]
    assert answer.json()["guardrails"] == ["no-forbidden"]
    assert old_price["input"] == 2.0 and new_price["input"] == 20.0
    assert blocked.status == 400 and blocked.json()["error"]["code"] == "guardrail_blocked"
    assert priced.status == 200 and priced.headers["x-ratelimit-limit-requests"] == "3"
    tokens = TokenUsage(prompt_tokens=1000, completion_tokens=500)
    assert usage_cost(first) == cost_pico(tokens, Price.per_million(2.0, 8.0)) / 1e12
    assert usage_cost(priced) == cost_pico(tokens, Price.per_million(20.0, 80.0)) / 1e12
    assert limited.status == 429


async def test_a_stream_in_flight_keeps_the_guardrails_and_prices_it_started_with(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    release = asyncio.Event()
    steps = text_stream("a safe start, ", "then a forbidden word", usage=USAGE)
    fake.queue(Reply.stream(*steps[:2], WaitFor(release), *steps[2:]))  # the word: after
    fake.default = Reply.stream(*steps)
    path = tmp_path / "sluice.toml"
    config = openai_connection_toml(fake.base_url)
    async with running_gateway(tmp_path, config, env=ENV, config_path=path) as gw:
        assert gw.dev_key is not None
        client = await RawClient.connect(gw.host, gw.port)
        doc = {
            "model": "test/gpt-fake",
            "stream": True,
            "stream_options": {"include_usage": True},
            "messages": [{"role": "user", "content": "hi"}],
        }
        await client.send(post("/v1/chat/completions", json.dumps(doc).encode(), gw.dev_key.key))
        await client.read_head()
        first = await client.read_chunk()  # in flight, on the old config
        dearer = config.replace("input = 2.0, output = 8.0", "input = 20.0, output = 80.0")
        output_rail = KEYWORDS.replace('"input"', '"output"')
        await rewrite(path, dearer + output_rail)
        assert (await reload(gw)).status == 200
        release.set()
        assert first is not None
        rest = first
        while (piece := await client.read_chunk()) is not None:
            rest += piece
        await client.close()
        after = await chat(gw)
    tokens = TokenUsage(prompt_tokens=1000, completion_tokens=500)
    assert rest.endswith(b"data: [DONE]\n\n") and b"then a forbidden word" in rest
    assert (
        usage_cost(RawResponse(200, {}, rest))
        == cost_pico(tokens, Price.per_million(2.0, 8.0)) / 1e12
    )
    assert b'"code":"guardrail_blocked"' in after.body  # the next one: the new rule


async def test_what_needs_a_restart_is_reported_and_left_as_it_runs(tmp_path: Path) -> None:
    path = tmp_path / "sluice.toml"
    async with running_gateway(tmp_path, env=ENV, config_path=path) as gw:
        await rewrite(
            path,
            "max_body_bytes = 1000\nsse_keepalive_interval = 1.0\n"
            "[limits]\nredis_url = 'redis://127.0.0.1:1/0'\n"
            "[routing]\nbreaker_failures = 1\n"
            "[storage]\nurl = 'sqlite:///elsewhere.db'\nrequest_log_retention = '7d'\n",
        )
        answer = await reload(gw)
        running = gw.gateway.settings
        still = await exchange(gw.host, gw.port, get("/health", None))
    assert answer.status == 200
    assert answer.json()["changed"] == ["server"]
    assert answer.json()["needs_restart"] == [
        "[server] max_body_bytes",
        "[storage] url",
        "[limits] redis_url",
        "[routing] breaker_failures",
        "[storage] request_log_retention",
    ]
    assert running.server.sse_keepalive_interval == 1.0  # applied
    assert gw.gateway.services.keepalive_interval == 1.0
    assert running.server.max_body_bytes == 16 * 1024 * 1024  # as it runs
    assert running.limits.redis_url is None and running.routing.breaker_failures == 5
    assert running.storage_url.endswith("sluice.db")
    assert still.status == 200


async def test_metrics_carry_on_across_a_reload_labelled_by_the_new_connections(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    path = tmp_path / "sluice.toml"
    config = openai_connection_toml(fake.base_url)
    renamed = openai_connection_toml(fake.base_url, conn_id="conn_renamed")
    async with running_gateway(tmp_path, config, env=ENV, config_path=path) as gw:
        assert gw.dev_key is not None
        await chat(gw)
        await rewrite(path, renamed)
        assert (await reload(gw)).status == 200
        await chat(gw)
        scraped = (await exchange(gw.host, gw.port, get("/metrics", ADMIN))).body
    text = scraped.decode()
    assert 'sluice_requests_total{path="/v1/chat/completions",status="200"} 2.0' in text
    assert 'sluice_upstream_attempts_total{connection="conn_fake",outcome="served"}' in text
    assert 'sluice_upstream_attempts_total{connection="conn_renamed",outcome="served"}' in text
    assert text.count("# TYPE sluice_connection_breaker_state gauge") == 1


def settings_of(text: str) -> Settings:
    return build_settings(parse_config(text), {}, Path("/home"))


@pytest.mark.parametrize(
    ("text", "needs_restart"),
    [
        ("[server]\nport = 9000", ("[server] port",)),
        (
            "[server]\ntls_cert = 'c.pem'\ntls_key = 'k.pem'",
            ("[server] tls_cert", "[server] tls_key"),
        ),
        ("[server]\nadmin_key_env = 'OTHER'", ("[server] admin_key_env",)),
        ("[server]\nmetrics_listen = '127.0.0.1:9464'", ("[server] metrics_listen",)),
        ("[server]\nmax_json_depth = 16\nshutdown_grace = 1", ()),
        ("[server]\ndemo = false", ()),
        ("[server]\ndev_key = false", ("[server] dev_key",)),
        ("[limits]\nkey = { requests = 5 }", ()),
        ("[limits]\nkey_prefix = 'other:'", ("[limits] key_prefix",)),
        ("[metering]\nhold_ttl = 60", ("[metering] hold_ttl",)),
        ("[routing]\nbreaker_cooldown = 1", ("[routing] breaker_cooldown",)),
    ],
    ids=[
        "port",
        "tls",
        "admin-key-env",
        "metrics-listen",
        "per-request",
        "demo",
        "dev-key",
        "limits",
        "limit-store",
        "holds",
        "breaker",
    ],
)
def test_effective_applies_what_a_generation_holds_and_names_the_rest(
    text: str, needs_restart: tuple[str, ...]
) -> None:
    running, new = settings_of(""), settings_of(text)
    applied, fixed = effective(running, new)
    assert fixed == needs_restart
    assert applied.connections == new.connections and applied.limits.key == new.limits.key
    for name in ("port", "tls_cert", "admin_key_env"):
        assert getattr(applied.server, name) == getattr(running.server, name)
    assert applied.server.max_json_depth == new.server.max_json_depth
    assert (applied.metering, applied.routing) == (running.metering, running.routing)
    assert applied.limits.key_prefix == running.limits.key_prefix
