"""``POST /v1/embeddings`` through a real gateway and the official openai SDK: vectors
in input order as floats and base64, metered on input tokens to the nano-dollar, logged;
failover before the answer; batches split per provider and joined in order (Gemini's
100, Bedrock Titan one per call, fanned out); a failed batch fails the whole request
and charges nothing; bad input is a precise 400 with nothing charged."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest
from openai import AsyncOpenAI, BadRequestError

from sluice.core.usage import Price, TokenUsage
from sluice.metering.charges import nano_from_pico
from sluice.metering.pricing import cost_pico
from sluice.server.lifecycle import RunningGateway
from tests.support.accounts import metered_key, settled
from tests.support.fake_upstream import FakeUpstream, Recorded, Reply, responding
from tests.support.gateway import running_gateway
from tests.support.raw_http import exchange, get, post

USD = 10**9
PRICE = Price.per_million(0.02, 0.0)


def vector_of(text: str, dims: int = 4) -> list[float]:
    """What the fake upstreams embed ``text`` as: recognisable, order-revealing."""
    return [float(len(text)), float(ord(text[0])), *([0.5] * (dims - 2))]


def openai_embedding(rec: Recorded) -> Reply:
    doc = rec.json()
    inputs = doc["input"]
    data = [
        {"object": "embedding", "index": i, "embedding": vector_of(str(text))}
        for i, text in enumerate(inputs)
    ]
    data.reverse()  # the index decides the order, not the position
    tokens = 3 * len(inputs)
    usage = {"prompt_tokens": tokens, "total_tokens": tokens}
    return Reply.json({"object": "list", "data": data, "model": doc["model"], "usage": usage})


def openai_toml(*bases: str) -> str:
    conns = "".join(
        f"""
[[connections]]
id = "emb_{n}"
provider = "openai-compatible"
base_url = "{base}"
api_key_env = "FAKE_UPSTREAM_KEY"
"""
        for n, base in enumerate(bases)
    )
    serving = ", ".join(f'emb_{n} = "embed-fake"' for n in range(len(bases)))
    return (
        conns
        + f"""
[[models]]
id = "test/embed"
providers = {{ {serving} }}
price = {{ input = 0.02, output = 0.0 }}
"""
    )


def sdk(gw: RunningGateway, key: str | None = None) -> AsyncOpenAI:
    assert gw.dev_key is not None
    return AsyncOpenAI(base_url=gw.base_url + "/v1", api_key=key or gw.dev_key.key, max_retries=0)


def embed(doc: dict[str, Any], key: str) -> bytes:
    return post("/v1/embeddings", json.dumps(doc).encode(), key)


async def balance(gw: RunningGateway, name: str) -> tuple[int, int]:
    await settled(gw.gateway)
    account = await gw.gateway.store.get_account(name)
    assert account is not None
    return account.balance, account.held


async def test_a_batch_comes_back_in_order_as_floats_and_as_base64(tmp_path: Path) -> None:
    texts = ["a cat", "the dog barks", "z"]
    async with (
        responding(openai_embedding) as up,
        running_gateway(tmp_path, openai_toml(up.base_url)) as gw,
        sdk(gw) as client,
    ):
        floats = await client.embeddings.create(
            model="test/embed", input=texts, encoding_format="float", dimensions=4
        )
        packed = await client.embeddings.create(model="test/embed", input=texts)  # SDK: base64
    assert [d.embedding for d in floats.data] == [vector_of(t) for t in texts]
    assert [d.index for d in floats.data] == [0, 1, 2]
    assert [d.embedding for d in packed.data] == [vector_of(t) for t in texts]
    assert floats.model == "test/embed"
    assert floats.usage.prompt_tokens == floats.usage.total_tokens == 9
    extra: Any = floats.usage.model_extra
    assert extra["cost"] == nano_from_pico(cost_pico(TokenUsage(prompt_tokens=9), PRICE)) / USD
    sent = up.requests[0].json()
    assert sent == {
        "model": "embed-fake",
        "input": texts,
        "encoding_format": "float",
        "dimensions": 4,
    }
    assert up.requests[0].path == "/v1/embeddings"


async def test_a_metered_key_is_held_charged_exactly_and_logged(tmp_path: Path) -> None:
    async with (
        responding(openai_embedding) as up,
        running_gateway(tmp_path, openai_toml(up.base_url)) as gw,
    ):
        key = await metered_key(gw.gateway.store, "team", USD)
        resp = await exchange(
            gw.host,
            gw.port,
            embed({"model": "test/embed", "input": ["hi", "yo"]}, key),
        )
        assert resp.status == 200, resp.body
        charged = nano_from_pico(cost_pico(TokenUsage(prompt_tokens=6), PRICE))
        assert charged > 0
        assert await balance(gw, "team") == (USD - charged, 0)
        assert await gw.gateway.store.reconcile() == []
        rid = resp.headers["x-request-id"]
        row = json.loads((await exchange(gw.host, gw.port, get(f"/v1/requests/{rid}", key))).body)
    answer = json.loads(resp.body)
    assert answer["credits_used"] == charged / USD
    assert row["front_door"] == "embeddings"
    assert row["prompt_tokens"] == 6
    assert row["completion_tokens"] == 0
    assert row["status"] == "complete"
    assert row["credits_charged"] == charged / USD
    assert row["served_model"] == "test/embed"


async def test_a_failing_connection_fails_over_before_the_answer(tmp_path: Path) -> None:
    def broken(rec: Recorded) -> Reply:
        return Reply.json({"error": {"message": "overloaded", "type": "server_error"}}, 503)

    async with (
        responding(broken) as down,
        responding(openai_embedding) as up,
        running_gateway(tmp_path, openai_toml(down.base_url, up.base_url)) as gw,
        sdk(gw) as client,
    ):
        got = await client.embeddings.create(
            model="test/embed", input="hello", encoding_format="float"
        )
    assert got.data[0].embedding == vector_of("hello")
    assert len(down.requests) == 1
    assert len(up.requests) == 1


def gemini_toml(base: str) -> str:
    return f"""
[server]
port = 0
max_embedding_inputs = 300

[[connections]]
id = "gem"
provider = "gemini"
base_url = "{base}"
api_key_env = "FAKE_UPSTREAM_KEY"

[[models]]
id = "test/gemini-embed"
providers = {{ gem = "gemini-embedding-001" }}
price = {{ input = 0.15, output = 0.0 }}
"""


def gemini_batch(rec: Recorded) -> Reply:
    texts = [r["content"]["parts"][0]["text"] for r in rec.json()["requests"]]
    return Reply.json({"embeddings": [{"values": vector_of(t)} for t in texts]})


async def test_gemini_batches_of_100_are_joined_in_order(tmp_path: Path) -> None:
    texts = [f"text number {i}" for i in range(250)]
    async with (
        responding(gemini_batch) as up,
        running_gateway(tmp_path, gemini_toml(up.root_url)) as gw,
        sdk(gw) as client,
    ):
        got = await client.embeddings.create(
            model="test/gemini-embed", input=texts, encoding_format="float"
        )
    assert [d.embedding for d in got.data] == [vector_of(t) for t in texts]
    sizes = sorted(len(r.json()["requests"]) for r in up.requests)
    assert sizes == [50, 100, 100]
    assert all(r.path.endswith(":batchEmbedContents") for r in up.requests)
    # Gemini counts no tokens: the gateway's estimate is charged, and says so
    assert got.usage.prompt_tokens > 0


async def test_token_arrays_on_a_provider_that_cannot_take_them_are_refused(
    tmp_path: Path,
) -> None:
    async with (
        responding(gemini_batch) as up,
        running_gateway(tmp_path, gemini_toml(up.root_url)) as gw,
    ):
        key = await metered_key(gw.gateway.store, "team", USD)
        resp = await exchange(
            gw.host,
            gw.port,
            embed({"model": "test/gemini-embed", "input": [[1, 2], [3]]}, key),
        )
        assert await balance(gw, "team") == (USD, 0)
    assert resp.status == 400
    assert json.loads(resp.body)["error"]["code"] == "token_input_unsupported"
    assert up.requests == []


ACCESS_KEY = "AKIDEXAMPLE"


@pytest.fixture
def aws_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
    for name in ("AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_BEARER_TOKEN_BEDROCK"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/aws-config")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/aws-credentials")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def titan_toml(base: str) -> str:
    return f"""
[[connections]]
id = "brk"
provider = "aws-bedrock"
base_url = "{base}"
region = "us-east-1"

[[models]]
id = "test/titan"
providers = {{ brk = "amazon.titan-embed-text-v2:0" }}
price = {{ input = 0.02, output = 0.0 }}
"""


def titan(rec: Recorded) -> Reply:
    text = rec.json()["inputText"]
    if text == "poison":
        return Reply.json(
            {"message": "Malformed input request"},
            400,
            **{"x-amzn-errortype": "ValidationException:http://internal.amazon.com/"},
        )
    return Reply.json({"embedding": vector_of(text), "inputTextTokenCount": len(text.split())})


@pytest.mark.usefixtures("aws_environment")
async def test_bedrock_titan_fans_out_one_call_per_input_in_order(tmp_path: Path) -> None:
    texts = [f"input {'word ' * i}".strip() for i in range(1, 21)]
    async with (
        responding(titan) as up,
        running_gateway(tmp_path, titan_toml(up.root_url)) as gw,
    ):
        key = await metered_key(gw.gateway.store, "team", USD)
        resp = await exchange(
            gw.host,
            gw.port,
            embed({"model": "test/titan", "input": texts}, key),
        )
        assert resp.status == 200, resp.body
        tokens = sum(len(t.split()) for t in texts)
        charged = nano_from_pico(cost_pico(TokenUsage(prompt_tokens=tokens), PRICE))
        assert await balance(gw, "team") == (USD - charged, 0)
    answer = json.loads(resp.body)
    assert [d["embedding"] for d in answer["data"]] == [vector_of(t) for t in texts]
    assert answer["usage"]["prompt_tokens"] == tokens
    assert len(up.requests) == len(texts)
    assert {unquote(r.path) for r in up.requests} == {"/model/amazon.titan-embed-text-v2:0/invoke"}
    assert all(r.headers["authorization"].startswith("AWS4-HMAC-SHA256") for r in up.requests)


@pytest.mark.usefixtures("aws_environment")
async def test_one_failed_call_of_a_fan_out_fails_it_all_and_charges_nothing(
    tmp_path: Path,
) -> None:
    texts = ["fine", "also fine", "poison", "fine again"]
    async with (
        responding(titan) as up,
        running_gateway(tmp_path, titan_toml(up.root_url)) as gw,
    ):
        key = await metered_key(gw.gateway.store, "team", USD)
        resp = await exchange(
            gw.host,
            gw.port,
            embed({"model": "test/titan", "input": texts}, key),
        )
        assert await balance(gw, "team") == (USD, 0)
        assert await gw.gateway.store.reconcile() == []
    assert resp.status == 400, resp.body
    assert "Malformed input request" in json.loads(resp.body)["error"]["message"]


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"model": "test/embed", "input": ""}, "invalid_input"),
        ({"model": "test/embed", "input": []}, "invalid_input"),
        ({"model": "test/embed", "input": ["ok", ""]}, "invalid_input"),
        ({"model": "test/embed", "input": ["ok", [1, 2]]}, "invalid_input"),
        ({"model": "test/embed", "input": ["a", "b", "c", "d"]}, "too_many_inputs"),
    ],
)
async def test_bad_input_is_a_precise_400_and_costs_nothing(
    tmp_path: Path, body: dict[str, Any], code: str
) -> None:
    config = "[server]\nport = 0\nmax_embedding_inputs = 3\n"
    async with (
        responding(openai_embedding) as up,
        running_gateway(tmp_path, config + openai_toml(up.base_url)) as gw,
    ):
        key = await metered_key(gw.gateway.store, "team", USD)
        resp = await exchange(gw.host, gw.port, embed(body, key))
        assert await balance(gw, "team") == (USD, 0)
    assert resp.status == 400
    error = json.loads(resp.body)["error"]
    assert error["code"] == code
    assert error["param"] == "input"
    assert up.requests == []


async def test_sdk_errors_name_the_field(tmp_path: Path, fake: FakeUpstream) -> None:
    async with (
        running_gateway(tmp_path, openai_toml(fake.base_url)) as gw,
        sdk(gw) as client,
    ):
        with pytest.raises(BadRequestError) as caught:
            await client.embeddings.create(model="test/embed", input=[])
    assert caught.value.code == "invalid_input"


def cohere(rec: Recorded) -> Reply:
    texts = rec.json()["texts"]
    body = {
        "id": "emb-1",
        "response_type": "embeddings_floats",
        "texts": texts,
        "embeddings": [vector_of(t) for t in texts],
    }
    return Reply.json(body, 200, **{"x-amzn-bedrock-input-token-count": str(2 * len(texts))})


@pytest.mark.usefixtures("aws_environment")
async def test_bedrock_cohere_batches_of_96_are_joined_in_order(tmp_path: Path) -> None:
    texts = [f"passage {i}" for i in range(200)]
    config = titan_toml("").replace("amazon.titan-embed-text-v2:0", "cohere.embed-english-v3")
    async with responding(cohere) as up:
        config = config.replace('base_url = ""', f'base_url = "{up.root_url}"')
        async with running_gateway(tmp_path, config) as gw, sdk(gw) as client:
            got = await client.embeddings.create(
                model="test/titan", input=texts, encoding_format="float"
            )
    assert [d.embedding for d in got.data] == [vector_of(t) for t in texts]
    assert sorted(len(r.json()["texts"]) for r in up.requests) == [8, 96, 96]
    assert got.usage.prompt_tokens == 400  # the header's count, summed over the batches
