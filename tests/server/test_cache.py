"""The response cache (issue 26, docs/cache.md), through the official SDKs over real
sockets: a streamed request, then the same one, is a hit served event by event from the
first answer (the upstream asked once), folded by the SDK into the same text, charged
the cache's share, logged with the request that filled it; the same question through
chat and then Messages is one entry; another account never hits an account's entry;
what is never kept (an error, a `length` cut, a guardrail's change, `no-store`)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from anthropic import AsyncAnthropic
from openai import AsyncOpenAI

from sluice.core.principal import KeyPolicy
from sluice.server.lifecycle import RunningGateway
from tests.server.test_metrics_mix import samples
from tests.server.test_reload import ADMIN, ENV, reload
from tests.support.accounts import metered_key
from tests.support.fake_openai import DONE, chunk, text_stream
from tests.support.fake_upstream import Cut, FakeUpstream, Reply
from tests.support.gateway import running_gateway
from tests.support.raw_http import exchange, get, post

USAGE = {"prompt_tokens": 9, "completion_tokens": 5, "total_tokens": 14}
PIECES = ("The ", "answer ", "is ", "forty-", "two.")
FUNDS = 10**9


def config(fake: FakeUpstream, cache: str = "{ ttl = 600 }", extra: str = "") -> str:
    return (
        f"{extra}"
        f'[[connections]]\nid = "conn_fake"\nprovider = "openai-compatible"\n'
        f'base_url = "{fake.base_url}"\n'
        f'[[models]]\nid = "test/m"\nproviders = {{ conn_fake = "m" }}\ncache = {cache}\n'
        "price = { input = 1.0, output = 2.0 }\n"
    )


@pytest.fixture
async def fake() -> AsyncIterator[FakeUpstream]:
    upstream = FakeUpstream()
    await upstream.start()
    upstream.default = Reply.stream(*text_stream(*PIECES, usage=USAGE))
    yield upstream
    await upstream.close()


def chat_body(**extra: Any) -> bytes:
    doc = {"model": "test/m", "stream": True, "max_tokens": 100,
           "messages": [{"role": "user", "content": "What is the answer?"}]}  # fmt: skip
    return json.dumps(doc | extra).encode()


async def ask(gw: RunningGateway, key: str, body: bytes | None = None, headers: str = "") -> Any:
    return await exchange(
        gw.host, gw.port, post("/v1/chat/completions", body or chat_body(), key, extra=headers)
    )


async def row(gw: RunningGateway, key: str, request_id: str) -> Any:
    await gw.gateway.writer.flush()
    return (await exchange(gw.host, gw.port, get(f"/v1/requests/{request_id}", key))).json()


def contents(body: bytes) -> str:
    text = ""
    for line in body.split(b"\n"):
        if line.startswith(b"data: {"):
            for choice in json.loads(line[6:]).get("choices", []):
                text += choice.get("delta", {}).get("content") or ""
    return text


async def test_the_same_stream_twice_is_one_upstream_call_and_a_free_hit(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    async with running_gateway(tmp_path, config(fake)) as gw:
        key = await metered_key(gw.gateway.store, "team", FUNDS)
        client = AsyncOpenAI(base_url=gw.base_url + "/v1", api_key=key, max_retries=0)
        folded, heads = [], []
        for _ in range(2):
            raw = await client.chat.completions.with_raw_response.create(
                model="test/m",
                max_tokens=100,
                stream=True,
                stream_options={"include_usage": True},
                messages=[{"role": "user", "content": "What is the answer?"}],
            )
            heads.append(raw.headers)
            text, usage = "", None
            async for event in raw.parse():
                text += "".join(c.delta.content or "" for c in event.choices)
                usage = event.usage or usage
            folded.append((text, usage))
        first = await row(gw, key, heads[0]["x-request-id"])
        second = await row(gw, key, heads[1]["x-request-id"])
        await client.close()
    assert len(fake.requests) == 1
    assert [h["x-sluice-cache"] for h in heads] == ["miss", "hit"]
    assert folded[0][0] == folded[1][0] == "".join(PIECES)
    hit_usage: Any = folded[1][1]
    assert hit_usage.completion_tokens == 5 and hit_usage.prompt_tokens == 9
    assert hit_usage.model_extra["price_source"] == "cache" and hit_usage.model_extra["cost"] == 0
    assert first["cache"] == "miss" and first["credits_charged"] > 0
    assert second["cache"] == "hit" and second["cache_filled_by"] == first["id"]
    assert second["status"] == "complete" and second["credits_charged"] == 0
    assert second["price_source"] == "cache"


async def test_a_hit_is_charged_the_configured_share(tmp_path: Path, fake: FakeUpstream) -> None:
    async with running_gateway(tmp_path, config(fake, "{ price_share = 0.5 }")) as gw:
        key = await metered_key(gw.gateway.store, "team", FUNDS)
        miss, hit = await ask(gw, key), await ask(gw, key)
        first = await row(gw, key, miss.headers["x-request-id"])
        second = await row(gw, key, hit.headers["x-request-id"])
    assert hit.headers["x-sluice-cache"] == "hit"
    assert second["credits_charged"] == pytest.approx(first["credits_charged"] / 2, rel=1e-3)


async def test_one_question_through_chat_then_messages_is_one_entry(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    async with running_gateway(tmp_path, config(fake)) as gw:
        key = await metered_key(gw.gateway.store, "team", FUNDS)
        await ask(gw, key)
        client = AsyncAnthropic(base_url=gw.base_url, api_key=key, max_retries=0)
        async with client.messages.stream(
            model="test/m",
            max_tokens=100,
            messages=[{"role": "user", "content": "What is the answer?"}],
        ) as stream:
            message = await stream.get_final_message()
            head = stream.response.headers
        await client.close()
    assert len(fake.requests) == 1
    assert head["x-sluice-cache"] == "hit"
    assert "".join(b.text for b in message.content if b.type == "text") == "".join(PIECES)
    assert message.usage.output_tokens == 5


async def test_another_account_never_hits_an_accounts_entry(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    async with running_gateway(tmp_path, config(fake)) as gw:
        mine = await metered_key(gw.gateway.store, "mine", FUNDS)
        theirs = await metered_key(gw.gateway.store, "theirs", FUNDS)
        answers = [await ask(gw, k) for k in (mine, theirs, mine, theirs)]
    assert [a.headers["x-sluice-cache"] for a in answers] == ["miss", "miss", "hit", "hit"]
    assert len(fake.requests) == 2


async def test_a_global_entry_is_shared_and_reveals_no_other_request(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    async with running_gateway(tmp_path, config(fake, '{ scope = "global" }')) as gw:
        mine = await metered_key(gw.gateway.store, "mine", FUNDS)
        theirs = await metered_key(gw.gateway.store, "theirs", FUNDS)
        await ask(gw, mine)
        hit = await ask(gw, theirs)
        logged = await row(gw, theirs, hit.headers["x-request-id"])
    assert hit.headers["x-sluice-cache"] == "hit" and len(fake.requests) == 1
    assert logged["cache_filled_by"] is None  # another account's request id is not shown


async def test_cache_control_refreshes_or_skips_the_cache(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    async with running_gateway(tmp_path, config(fake)) as gw:
        key = await metered_key(gw.gateway.store, "team", FUNDS)
        unstored = await ask(gw, key, headers="Cache-Control: no-store\r\n")
        filled = await ask(gw, key)
        refreshed = await ask(gw, key, headers="Cache-Control: no-cache\r\n")
        hit = await ask(gw, key)
        whole = await ask(gw, key, chat_body(stream=False))
    outcomes = [a.headers["x-sluice-cache"] for a in (unstored, filled, refreshed, hit, whole)]
    assert outcomes == ["bypass", "miss", "miss", "hit", "hit"]
    assert len(fake.requests) == 3  # no-store, the fill, the refresh


@pytest.mark.parametrize(
    "reply",
    [
        Reply.stream(chunk(role="assistant", content=""), chunk(content="The "), Cut()),
        Reply.stream(*text_stream(*PIECES, usage=USAGE, finish="length")),
        Reply.stream(*text_stream(*PIECES), DONE),  # no usage reported
    ],
    ids=["cut", "length", "no-usage"],
)
async def test_an_answer_that_is_not_whole_is_never_kept(
    tmp_path: Path, fake: FakeUpstream, reply: Reply
) -> None:
    fake.default = reply
    async with running_gateway(tmp_path, config(fake)) as gw:
        key = await metered_key(gw.gateway.store, "team", FUNDS)
        answers = [await ask(gw, key) for _ in range(2)]
    assert [a.headers["x-sluice-cache"] for a in answers] == ["miss", "miss"]
    assert len(fake.requests) == 2


@pytest.mark.parametrize("action", ["redact", "block"])
async def test_a_guardrails_change_is_never_kept(
    tmp_path: Path, fake: FakeUpstream, action: str
) -> None:
    async with running_gateway(tmp_path, config(fake) + rule(action)) as gw:
        key = await metered_key(gw.gateway.store, "team", FUNDS)
        answers = [await ask(gw, key) for _ in range(2)]
    assert [a.headers["x-sluice-cache"] for a in answers] == ["miss", "miss"]
    assert len(fake.requests) == 2
    assert "forty" not in contents(answers[1].body)


async def test_a_rule_added_after_an_answer_was_kept_still_blocks_it(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    async with filled_then_reloaded(tmp_path, fake) as (gw, key, changed):
        before = await ask(gw, key)
        await changed(lambda text: text + rule("block"))
        after = await ask(gw, key)
    assert before.headers["x-sluice-cache"] == "hit"
    assert contents(before.body) == "".join(PIECES)
    assert after.headers["x-sluice-cache"] == "hit" and len(fake.requests) == 1
    assert b"guardrail_blocked" in after.body and "forty" not in contents(after.body)


@asynccontextmanager
async def filled_then_reloaded(
    tmp_path: Path, fake: FakeUpstream
) -> AsyncIterator[tuple[RunningGateway, str, Callable[[Callable[[str], str]], Awaitable[None]]]]:
    """A gateway whose cache holds the question's answer, a funded key, and a way to
    change its config file and reload it."""
    path = tmp_path / "sluice.toml"
    async with running_gateway(tmp_path, config(fake), env=ENV, config_path=path) as gw:
        key = await metered_key(gw.gateway.store, "team", FUNDS)
        await ask(gw, key)

        async def changed(edit: Callable[[str], str]) -> None:
            path.write_text(edit(path.read_text()))
            assert (await reload(gw)).status == 200

        yield gw, key, changed


def rule(action: str) -> str:
    return (
        f'[[guardrails]]\nname = "no-forty"\nstage = "output"\nkind = "regex"\n'
        f'pattern = "forty"\naction = "{action}"\n'
    )


async def test_the_cache_is_in_metrics(tmp_path: Path, fake: FakeUpstream) -> None:
    async with running_gateway(tmp_path, config(fake), env=ENV) as gw:
        key = await metered_key(gw.gateway.store, "team", FUNDS)
        for _ in range(3):
            await ask(gw, key)
        scraped = await exchange(gw.host, gw.port, get("/metrics", ADMIN))
    found = samples(scraped.body.decode())
    assert found["sluice_cache_requests_total", (("outcome", "miss"),)] == 1
    assert found["sluice_cache_requests_total", (("outcome", "hit"),)] == 2
    assert found["sluice_cache_entries", ()] == 1 and found["sluice_cache_bytes", ()] > 500
    assert found["sluice_cache_evictions_total", ()] == 0


async def test_a_routes_cache_applies_to_requests_naming_the_route(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    route = '[[routes]]\nname = "answers"\nchain = [{ model = "test/m" }]\ncache = { ttl = 60 }\n'
    uncached = config(fake).replace("cache = { ttl = 600 }\n", "")
    async with running_gateway(tmp_path, uncached + route) as gw:
        key = await metered_key(gw.gateway.store, "team", FUNDS)
        by_route = [await ask(gw, key, chat_body(model="answers")) for _ in range(2)]
        by_model = await ask(gw, key)
    assert [a.headers["x-sluice-cache"] for a in by_route] == ["miss", "hit"]
    assert "x-sluice-cache" not in by_model.headers
    assert len(fake.requests) == 2


async def test_an_answer_with_any_choice_cut_is_never_kept(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    fake.default = Reply.stream(
        *(chunk(role="assistant", content="", index=i) for i in (0, 1)),
        chunk(content="whole", index=0),
        chunk(content="cut", index=1),
        chunk(finish="stop", index=0),
        chunk(finish="length", index=1),
        chunk(usage=USAGE, choices=False),
        DONE,
    )
    async with running_gateway(tmp_path, config(fake)) as gw:
        key = await metered_key(gw.gateway.store, "team", FUNDS)
        answers = [await ask(gw, key, chat_body(n=2)) for _ in range(2)]
    assert [a.headers["x-sluice-cache"] for a in answers] == ["miss", "miss"]


async def test_a_free_hit_holds_no_credit(tmp_path: Path, fake: FakeUpstream) -> None:
    """An account with one nano-dollar cannot cover a miss's hold; a free hit holds
    nothing."""
    async with running_gateway(tmp_path, config(fake, '{ scope = "global" }')) as gw:
        funded = await metered_key(gw.gateway.store, "funded", FUNDS)
        broke = await metered_key(gw.gateway.store, "broke", 1)
        refused = await ask(gw, broke)
        await ask(gw, funded)
        hit = await ask(gw, broke)
    assert refused.status == 402 and "x-sluice-cache" not in refused.headers
    assert hit.status == 200 and hit.headers["x-sluice-cache"] == "hit"
    assert contents(hit.body) == "".join(PIECES)


async def test_a_reload_that_changes_the_upstream_leaves_old_answers_unused(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    async with filled_then_reloaded(tmp_path, fake) as (gw, key, changed):
        await changed(lambda text: text.replace('conn_fake = "m"', 'conn_fake = "m-2"'))
        after = [await ask(gw, key) for _ in range(2)]
    assert [a.headers["x-sluice-cache"] for a in after] == ["miss", "hit"]
    assert [r.json()["model"] for r in fake.requests] == ["m", "m-2"]


async def test_the_body_says_what_cache_control_says(tmp_path: Path, fake: FakeUpstream) -> None:
    async with running_gateway(tmp_path, config(fake)) as gw:
        key = await metered_key(gw.gateway.store, "team", FUNDS)
        unstored = await ask(gw, key, chat_body(cache={"no-store": True}))
        filled = await ask(gw, key)
        refreshed = await ask(gw, key, chat_body(cache={"no-cache": True}))
        client = AsyncAnthropic(base_url=gw.base_url, api_key=key, max_retries=0)
        async with client.messages.stream(
            model="test/m",
            max_tokens=100,
            messages=[{"role": "user", "content": "What is the answer?"}],
            extra_body={"cache": {"no-store": True}},
        ) as stream:
            await stream.get_final_message()
            messages_outcome = stream.response.headers["x-sluice-cache"]
        await client.close()
        hit = await ask(gw, key, chat_body(cache=None))
        refused = await ask(gw, key, chat_body(cache={"no-cache": "yes"}))
    outcomes = [a.headers["x-sluice-cache"] for a in (unstored, filled, refreshed, hit)]
    assert outcomes == ["bypass", "miss", "miss", "hit"]
    assert messages_outcome == "bypass"
    assert len(fake.requests) == 4
    assert all("cache" not in r.json() for r in fake.requests)  # the gateway's, not sent
    assert refused.status == 400


async def test_a_key_may_be_kept_from_reading_or_filling_the_cache(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    async with running_gateway(tmp_path, config(fake, '{ scope = "global" }')) as gw:
        store = gw.gateway.store
        no_fill = await metered_key(store, "a", FUNDS, policy=KeyPolicy(cache_fill=False))
        no_read = await metered_key(store, "b", FUNDS, policy=KeyPolicy(cache_read=False))
        neither = await metered_key(
            store, "c", FUNDS, policy=KeyPolicy(cache_read=False, cache_fill=False)
        )
        plain = await metered_key(store, "d", FUNDS)
        unkept = await ask(gw, no_fill)
        after_unkept = await ask(gw, plain)
        refreshed = await ask(gw, no_read)
        read = await ask(gw, no_fill)
        bypassed = await ask(gw, neither)
    outcomes = [
        a.headers["x-sluice-cache"] for a in (unkept, after_unkept, refreshed, read, bypassed)
    ]
    assert outcomes == ["miss", "miss", "miss", "hit", "bypass"]
    assert len(fake.requests) == 4
