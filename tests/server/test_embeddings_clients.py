"""Embeddings as the clients people use read them, unchanged, against the built-in
``sluice/demo-embed`` (no key needed): the openai SDK for Python and for Node
(``tests/node/openai_embeddings.mjs``: a list as floats and as base64, ``dimensions``,
``models.retrieve``), the Vercel AI SDK's ``embedMany`` and LangChain's
``OpenAIEmbeddings``. The demo's vectors are deterministic and similar texts get
similar vectors."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest
from langchain_openai import OpenAIEmbeddings
from openai import AsyncOpenAI, BadRequestError
from pydantic import SecretStr

from tests.agents.cli import run_program
from tests.support.gateway import running_gateway
from tests.support.node import NODE_DIR, pinned_node

MODEL = "sluice/demo-embed"
TEXTS = [
    "the cat sat on the mat",
    "the cat sat on a mat",
    "quarterly revenue grew by nine percent",
]


def cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))


def close(a: list[list[float]], b: list[list[float]]) -> bool:
    """Equal as float32 (base64 carries float32s; JSON floats may carry more)."""
    return all(
        math.isclose(x, y, rel_tol=1e-6, abs_tol=1e-7)
        for va, vb in zip(a, b, strict=True)
        for x, y in zip(va, vb, strict=True)
    )


async def test_the_python_sdk_embeds_with_the_demo_deterministically(tmp_path: Path) -> None:
    async with running_gateway(tmp_path) as gw:
        assert gw.dev_key is not None
        async with AsyncOpenAI(
            base_url=gw.base_url + "/v1", api_key=gw.dev_key.key, max_retries=0
        ) as client:
            first = await client.embeddings.create(
                model=MODEL, input=TEXTS, encoding_format="float"
            )
            again = await client.embeddings.create(model=MODEL, input=TEXTS)
            short = await client.embeddings.create(model=MODEL, input=TEXTS[0], dimensions=16)
    vectors = [d.embedding for d in first.data]
    assert close(vectors, [d.embedding for d in again.data])
    assert len(short.data[0].embedding) == 16
    same, other = cosine(vectors[0], vectors[1]), cosine(vectors[0], vectors[2])
    assert same > 0.8 > other
    assert first.usage.prompt_tokens > 0


async def test_langchain_openai_embeddings(tmp_path: Path) -> None:
    async with running_gateway(tmp_path) as gw:
        assert gw.dev_key is not None
        embeddings = OpenAIEmbeddings(
            model=MODEL,
            base_url=gw.base_url + "/v1",
            api_key=SecretStr(gw.dev_key.key),
            check_embedding_ctx_length=False,  # no tokenizer download: the gateway's models
            max_retries=0,
        )
        try:
            documents = await embeddings.aembed_documents(TEXTS)
            query = await embeddings.aembed_query(TEXTS[0])
        finally:  # its client is closed on this loop, not collected on a closed one
            await embeddings.async_client._client.close()
    assert len(documents) == 3
    assert close([query], [documents[0]])
    assert cosine(documents[0], documents[1]) > cosine(documents[0], documents[2])


async def test_the_node_sdk_and_vercel_embed_many(tmp_path: Path) -> None:
    node = pinned_node("openai")
    pinned_node("ai")
    async with running_gateway(tmp_path) as gw:
        assert gw.dev_key is not None
        env = {**os.environ, "SLUICE_BASE_URL": gw.base_url + "/v1", "SLUICE_KEY": gw.dev_key.key}
        env |= {"SLUICE_MODEL": MODEL, "SLUICE_TEXTS": json.dumps(TEXTS)}
        script = str(NODE_DIR / "openai_embeddings.mjs")
        code, out, err = await run_program(node, [script], NODE_DIR, env)
    assert code == 0, err
    seen = json.loads(out.strip().splitlines()[-1])
    assert seen["indices"] == [0, 1, 2]
    assert close(seen["floats"], seen["packed"])
    assert close(seen["floats"], seen["vercel"])
    assert seen["shortened"] == 8
    assert seen["usage"]["prompt_tokens"] == seen["vercelTokens"] > 0
    assert seen["retrieved"]["id"] == MODEL
    assert seen["retrieved"]["object"] == "model"


@pytest.mark.parametrize("path", ["/v1/embeddings", "/embeddings"])
async def test_the_path_answers_with_and_without_v1(tmp_path: Path, path: str) -> None:
    async with running_gateway(tmp_path) as gw:
        assert gw.dev_key is not None
        base = gw.base_url + path.removesuffix("/embeddings")
        async with AsyncOpenAI(base_url=base, api_key=gw.dev_key.key, max_retries=0) as client:
            got = await client.embeddings.create(model=MODEL, input="hello")
    assert len(got.data[0].embedding) > 0


async def test_a_model_that_cannot_embed_or_chat_is_refused_before_any_call(
    tmp_path: Path,
) -> None:
    async with running_gateway(tmp_path) as gw:
        assert gw.dev_key is not None
        async with AsyncOpenAI(
            base_url=gw.base_url + "/v1", api_key=gw.dev_key.key, max_retries=0
        ) as client:
            with pytest.raises(BadRequestError) as embedding:
                await client.embeddings.create(model="sluice/demo", input="hello")
            with pytest.raises(BadRequestError) as chat:
                await client.chat.completions.create(
                    model=MODEL, messages=[{"role": "user", "content": "hello"}]
                )
    for refused in (embedding.value, chat.value):
        assert refused.code == "model_capability_missing"
        assert refused.param == "model"
    assert "embeddings" in embedding.value.message
