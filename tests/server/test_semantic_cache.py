"""The semantic cache (issue 26, docs/cache.md#semantic-cache) with the demo embedder,
through the official SDK over real sockets: a paraphrase above the threshold is a hit
(the upstream asked once, the same transcript, the similarity in the log row), a
question below it a miss; other parameters, tools (unless allowed) and a failed
embedding call never hit by meaning; the embedding is the operator's cost."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from openai import AsyncOpenAI

from tests.server.test_cache import FUNDS, PIECES, ask, contents, fake, row
from tests.server.test_metrics_mix import samples
from tests.server.test_reload import ADMIN, ENV
from tests.support.accounts import metered_key
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import running_gateway
from tests.support.raw_http import RawClient, exchange, get, post

FRANCE = "What is the capital of France?"
PARAPHRASE = "what is the capital city of France"  # 0.926 to FRANCE with demo-embed
SPAIN = "What is the capital of Spain?"  # 0.763
BREAD = "How do I bake sourdough bread at home?"  # 0.108
DEMO = 'embedding_model = "sluice/demo-embed", threshold = 0.9'
TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
DOWN = (
    '[[connections]]\nid = "conn_down"\nprovider = "openai-compatible"\n'
    'base_url = "http://127.0.0.1:9"\n'
    '[[models]]\nid = "test/embed"\nproviders = { conn_down = "e" }\n'
    "capabilities = { embeddings = true }\n"
)


def config(fake: FakeUpstream, semantic: str = DEMO, extra: str = "") -> str:
    return (
        f'{extra}[[connections]]\nid = "conn_fake"\nprovider = "openai-compatible"\n'
        f'base_url = "{fake.base_url}"\n'
        f'[[models]]\nid = "test/m"\nproviders = {{ conn_fake = "m" }}\n'
        f"cache = {{ ttl = 600, semantic = {{ {semantic} }} }}\n"
        "price = { input = 1.0, output = 2.0 }\n"
    )


__all__ = ["fake"]  # the fixture, with the cache tests' answer


def body(question: str, **extra: Any) -> bytes:
    doc = {"model": "test/m", "stream": True, "max_tokens": 100,
           "messages": [{"role": "user", "content": question}]}  # fmt: skip
    return json.dumps(doc | extra).encode()


async def streamed(client: AsyncOpenAI, question: str) -> tuple[str, Any]:
    """The folded text of a streamed answer to ``question``, and its response headers."""
    raw = await client.chat.completions.with_raw_response.create(
        model="test/m",
        max_tokens=100,
        stream=True,
        messages=[{"role": "user", "content": question}],
    )
    text = ""
    async for event in raw.parse():
        text += "".join(c.delta.content or "" for c in event.choices)
    return text, raw.headers


async def test_a_paraphrase_above_the_threshold_hits_and_one_below_misses(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    async with running_gateway(tmp_path, config(fake), env=ENV) as gw:
        key = await metered_key(gw.gateway.store, "team", FUNDS)
        client = AsyncOpenAI(base_url=gw.base_url + "/v1", api_key=key, max_retries=0)
        answers = [await streamed(client, q) for q in (FRANCE, PARAPHRASE, SPAIN, BREAD)]
        await client.close()
        rows = [await row(gw, key, head["x-request-id"]) for _, head in answers]
        scraped = await exchange(gw.host, gw.port, get("/metrics", ADMIN))
    assert [head["x-sluice-cache"] for _, head in answers] == ["miss", "hit", "miss", "miss"]
    assert [r.json()["messages"][0]["content"] for r in fake.requests] == [FRANCE, SPAIN, BREAD]
    assert answers[1][0] == answers[0][0] == "".join(PIECES)
    filled, hit = rows[0], rows[1]
    assert hit["cache"] == "hit" and hit["cache_filled_by"] == filled["id"]
    assert hit["cache_similarity"] == pytest.approx(0.926, abs=0.001)
    assert hit["credits_charged"] == 0 and hit["price_source"] == "cache"
    assert all(r["cache_embedding_ms"] > 0 for r in rows)
    assert [r["cache_similarity"] for r in rows[2:]] == [None, None]
    # the embeddings are the operator's: the miss is charged its own tokens alone
    assert filled["credits_charged"] == pytest.approx((9 * 1.0 + 5 * 2.0) / 1e6)
    found = samples(scraped.body.decode())
    assert found["sluice_cache_embedding_tokens_total", (("model", "sluice/demo-embed"),)] > 0
    assert found["sluice_cache_embedding_seconds_count", (("outcome", "embedded"),)] == 4


async def test_other_parameters_never_hit_by_meaning(tmp_path: Path, fake: FakeUpstream) -> None:
    async with running_gateway(tmp_path, config(fake)) as gw:
        key = await metered_key(gw.gateway.store, "team", FUNDS)
        await ask(gw, key, body(FRANCE, temperature=0.2))
        warmer = await ask(gw, key, body(PARAPHRASE, temperature=0.7))
        same = await ask(gw, key, body(PARAPHRASE, temperature=0.2))
    assert [a.headers["x-sluice-cache"] for a in (warmer, same)] == ["miss", "hit"]
    assert len(fake.requests) == 2


@pytest.mark.parametrize(
    ("semantic", "outcome", "calls"),
    [(DEMO, "miss", 2), (DEMO + ", tools = true", "hit", 1)],
    ids=["tools-not-allowed", "tools-allowed"],
)
async def test_requests_with_tools_hit_by_meaning_only_when_allowed(
    tmp_path: Path, fake: FakeUpstream, semantic: str, outcome: str, calls: int
) -> None:
    async with running_gateway(tmp_path, config(fake, semantic)) as gw:
        key = await metered_key(gw.gateway.store, "team", FUNDS)
        await ask(gw, key, body(FRANCE, tools=TOOLS))
        paraphrased = await ask(gw, key, body(PARAPHRASE, tools=TOOLS))
        again = await ask(gw, key, body(FRANCE, tools=TOOLS))
    assert paraphrased.headers["x-sluice-cache"] == outcome
    assert again.headers["x-sluice-cache"] == "hit"  # the exact cache serves them still
    assert len(fake.requests) == calls


async def test_a_failed_embedding_is_a_plain_miss(tmp_path: Path, fake: FakeUpstream) -> None:
    semantic = 'embedding_model = "test/embed", threshold = 0.5'
    async with running_gateway(tmp_path, config(fake, semantic, DOWN), env=ENV) as gw:
        key = await metered_key(gw.gateway.store, "team", FUNDS)
        answers = [await ask(gw, key, body(q)) for q in (FRANCE, PARAPHRASE, FRANCE)]
        logged = await row(gw, key, answers[1].headers["x-request-id"])
        scraped = await exchange(gw.host, gw.port, get("/metrics", ADMIN))
    assert [a.status for a in answers] == [200, 200, 200]
    assert [a.headers["x-sluice-cache"] for a in answers] == ["miss", "miss", "hit"]
    assert contents(answers[1].body) == "".join(PIECES) and len(fake.requests) == 2
    assert logged["cache_similarity"] is None and logged["cache_embedding_ms"] is None
    found = samples(scraped.body.decode())
    assert found["sluice_cache_embedding_seconds_count", (("outcome", "failed"),)] == 2


async def test_another_account_never_hits_by_meaning(tmp_path: Path, fake: FakeUpstream) -> None:
    async with running_gateway(tmp_path, config(fake)) as gw:
        mine = await metered_key(gw.gateway.store, "mine", FUNDS)
        theirs = await metered_key(gw.gateway.store, "theirs", FUNDS)
        await ask(gw, mine, body(FRANCE))
        answers = [await ask(gw, k, body(PARAPHRASE)) for k in (theirs, mine)]
    assert [a.headers["x-sluice-cache"] for a in answers] == ["miss", "hit"]
    assert len(fake.requests) == 2


async def test_a_client_leaving_while_it_is_embedded_leaves_no_flight(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    """The demo embedder answers after 150 ms: a client gone before that lets go of
    the flight its miss leads, so an identical request later is not left waiting."""
    async with running_gateway(tmp_path, config(fake)) as gw:
        key = await metered_key(gw.gateway.store, "team", FUNDS)
        flights = gw.gateway.services.flights
        gone = await RawClient.connect(gw.host, gw.port)
        await gone.send(post("/v1/chat/completions", body(FRANCE), key))
        async with asyncio.timeout(5):
            while not len(flights):
                await asyncio.sleep(0.005)
        await gone.close()
        async with asyncio.timeout(5):
            while len(flights):
                await asyncio.sleep(0.01)
            later = await ask(gw, key, body(FRANCE))
    assert later.status == 200 and contents(later.body) == "".join(PIECES)


async def test_requests_that_joined_a_semantic_hit_are_served_its_answer(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    async with running_gateway(tmp_path, config(fake)) as gw:
        key = await metered_key(gw.gateway.store, "team", FUNDS)
        await ask(gw, key, body(FRANCE))
        flights = gw.gateway.services.flights
        leader = asyncio.ensure_future(ask(gw, key, body(PARAPHRASE)))
        async with asyncio.timeout(5):
            while not len(flights):  # the paraphrase is being embedded
                await asyncio.sleep(0.002)
        joiners = [asyncio.ensure_future(ask(gw, key, body(PARAPHRASE))) for _ in range(3)]
        answers = await asyncio.gather(leader, *joiners)
    assert len(fake.requests) == 1
    assert [a.headers["x-sluice-cache"] for a in answers] == ["hit"] * 4
    assert all(contents(a.body) == "".join(PIECES) for a in answers)
