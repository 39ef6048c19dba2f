"""The recorded embedding answers, read by each provider's official SDK from a fake on
127.0.0.1, and by our adapters: the same vectors and counts. The SDKs' own requests
are compared with the ones the adapters build.

openai (``embeddings.create``, float and its default base64), google-genai
(``models.embed_content`` with several contents: ``batchEmbedContents``), boto3
(bedrock-runtime ``invoke_model``, Titan and Cohere bodies, the token-count header).
"""

from __future__ import annotations

import json
from typing import Any, TypeVar
from urllib.parse import urlsplit

import pytest
from botocore.exceptions import ClientError
from google.genai import errors as genai_errors
from google.genai import types
from openai import AsyncOpenAI, BadRequestError

from sluice.core.connection import ConnectionSettings, Secret, Target
from sluice.core.embedding import EmbedCall
from sluice.providers.bedrock import BedrockAdapter
from sluice.providers.gemini import GeminiAdapter
from sluice.providers.openai import OpenAIAdapter
from tests.providers.test_bedrock_fidelity import with_boto3
from tests.providers.test_gemini_fidelity import KEY
from tests.providers.test_gemini_fidelity import sdk as genai_sdk
from tests.support.fake_upstream import FakeUpstream, Reply
from tests.support.gateway import counting_ids
from tests.support.transcript import FIXTURES

_T = TypeVar("_T")
TITAN = "amazon.titan-embed-text-v2:0"
COHERE = "cohere.embed-english-v3"


def recorded(name: str) -> tuple[Reply, bytes]:
    """The fixture as the fake's reply, and its body bytes."""
    doc = json.loads((FIXTURES / "embeddings" / f"{name}.json").read_text())
    body = json.dumps(doc["body"]).encode()
    return Reply(doc["status"], dict(doc["headers"]), body), body


def target(kind: str, native: str, base_url: str, key: str | None) -> Target:
    secret = Secret(key) if key else None
    conn = ConnectionSettings("conn", kind, base_url, secret, region="us-east-1")
    return Target("x/embed", native, conn)


# --- openai -----------------------------------------------------------------------------


def openai_target(fake: FakeUpstream) -> Target:
    return target("openai", "text-embedding-3-small", fake.base_url, "sk-test")


def openai_client(fake: FakeUpstream) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=fake.base_url, api_key="sk-test", max_retries=0)


@pytest.mark.parametrize(
    ("name", "fmt"), [("openai", "float"), ("openai_base64", None)], ids=["float", "default"]
)
async def test_openai_sdk_reads_the_recorded_answer_as_we_do(
    fake: FakeUpstream, name: str, fmt: str | None
) -> None:
    reply, body = recorded(name)
    fake.queue(reply)
    texts = tuple(f"input {i}" for i in range(len(json.loads(body)["data"])))
    extra: dict[str, Any] = {"encoding_format": fmt} if fmt else {}
    async with openai_client(fake) as sdk:
        answer = await sdk.embeddings.create(
            model="text-embedding-3-small", input=list(texts), **extra
        )
    adapter = OpenAIAdapter("openai", counting_ids())
    (batch,) = adapter.embed_batches(EmbedCall(texts=texts), openai_target(fake))
    ours = adapter.parse_embeddings(reply.headers, body, batch)
    assert [d.embedding for d in answer.data] == ours.vectors
    assert answer.usage.prompt_tokens == ours.prompt_tokens
    sent = fake.requests[0]
    assert sent.json()["encoding_format"] == (fmt or "base64")  # ours always asks float
    assert sent.path == urlsplit(batch.request.url).path


async def test_openai_sdk_and_adapter_send_the_same_request(fake: FakeUpstream) -> None:
    reply, _ = recorded("openai")
    fake.queue(reply)
    async with openai_client(fake) as sdk:
        await sdk.embeddings.create(
            model="text-embedding-3-small",
            input=[[1, 2, 3], [4, 5], [6]],
            encoding_format="float",
            dimensions=8,
            user="user-7",
        )
    call = EmbedCall(tokens=((1, 2, 3), (4, 5), (6,)), dimensions=8, user="user-7")
    (batch,) = OpenAIAdapter("openai", counting_ids()).embed_batches(call, openai_target(fake))
    sent = fake.requests[0]
    assert json.loads(batch.request.body) == sent.json()
    assert batch.request.headers["authorization"] == sent.headers["authorization"]


async def test_openai_sdk_reads_the_recorded_error_as_we_do(fake: FakeUpstream) -> None:
    reply, body = recorded("openai_error")
    fake.queue(reply)
    async with openai_client(fake) as sdk:
        with pytest.raises(BadRequestError) as caught:
            await sdk.embeddings.create(model="text-embedding-3-small", input="x", dimensions=8)
    ours = OpenAIAdapter("openai", counting_ids()).parse_error(reply.status, reply.headers, body)
    assert caught.value.message.endswith(ours.message)
    assert ours.status == caught.value.status_code == 400


# --- google-genai -----------------------------------------------------------------------

TWO: list[types.ContentUnionDict] = ["a", "b"]


async def test_genai_sdk_reads_the_recorded_batch_as_we_do(fake: FakeUpstream) -> None:
    reply, body = recorded("gemini")
    fake.queue(reply)
    texts = ("alpha", "beta", "gamma")
    contents: list[types.ContentUnionDict] = [*texts]
    async with genai_sdk(fake) as aio:
        answer = await aio.models.embed_content(
            model="gemini-embedding-001",
            contents=contents,
            config=types.EmbedContentConfig(output_dimensionality=8),
        )
    adapter = GeminiAdapter("gemini", counting_ids())
    call = EmbedCall(texts=texts, dimensions=8)
    (batch,) = adapter.embed_batches(call, target("gemini", "gemini-embedding-001", "x", KEY))
    ours = adapter.parse_embeddings(reply.headers, body, batch)
    assert [e.values for e in answer.embeddings or []] == ours.vectors
    assert ours.prompt_tokens is None
    sent = fake.requests[0]
    assert sent.path == "/v1beta/models/gemini-embedding-001:batchEmbedContents"
    assert sent.headers["x-goog-api-key"] == batch.request.headers["x-goog-api-key"]
    sdk_body = sent.json()
    for request in sdk_body["requests"]:
        request["content"].pop("role", None)  # the SDK marks each content a user turn
    assert sdk_body == json.loads(batch.request.body)


async def test_genai_sdk_reads_the_recorded_error_as_we_do(fake: FakeUpstream) -> None:
    reply, body = recorded("gemini_error")
    fake.queue(reply)
    async with genai_sdk(fake) as aio:
        with pytest.raises(genai_errors.ClientError) as caught:
            await aio.models.embed_content(model="gemini-embedding-001", contents=TWO)
    ours = GeminiAdapter("gemini", counting_ids()).parse_error(reply.status, reply.headers, body)
    assert caught.value.code == ours.status == 400
    assert caught.value.message == ours.message


# --- boto3 bedrock-runtime --------------------------------------------------------------


@pytest.fixture(autouse=True)
def no_aws_files(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"):
        monkeypatch.setenv(name, "/nonexistent/aws")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def invoke_vectors(doc: dict[str, Any]) -> list[list[float]]:
    """The vectors of a Titan answer or either shape of a Cohere one, as read by hand."""
    if "embedding" in doc:
        return [doc["embedding"]]
    found = doc["embeddings"]
    vectors: list[list[float]] = found["float"] if isinstance(found, dict) else found
    return vectors


@pytest.mark.parametrize(
    ("name", "native", "texts"),
    [
        ("bedrock_titan_v2", TITAN, ("the quick brown fox",)),
        ("bedrock_cohere", COHERE, ("the quick brown fox", "jumps over the lazy dog")),
        ("bedrock_cohere_floats", COHERE, ("the quick brown fox", "jumps over the lazy dog")),
    ],
)
async def test_boto3_invoke_model_reads_the_recorded_answer_as_we_do(
    fake: FakeUpstream, name: str, native: str, texts: tuple[str, ...]
) -> None:
    reply, _ = recorded(name)
    fake.queue(reply)
    adapter = BedrockAdapter("aws-bedrock", counting_ids())
    (batch,) = adapter.embed_batches(
        EmbedCall(texts=texts), target("aws-bedrock", native, fake.root_url, None)
    )

    def invoke(client: Any) -> tuple[bytes, dict[str, str]]:
        answer = client.invoke_model(
            modelId=native,
            body=batch.request.body,
            contentType="application/json",
            accept="application/json",
        )
        return answer["body"].read(), answer["ResponseMetadata"]["HTTPHeaders"]

    sdk_body, sdk_headers = await with_boto3(fake, invoke)
    ours = adapter.parse_embeddings(sdk_headers, sdk_body, batch)
    assert ours.vectors == invoke_vectors(json.loads(sdk_body))
    assert ours.prompt_tokens == int(sdk_headers["x-amzn-bedrock-input-token-count"])
    sent = fake.requests[0]
    assert sent.path == urlsplit(batch.request.url).path
    assert sent.body == batch.request.body
    assert sent.headers["content-type"] == batch.request.headers["content-type"]
    assert sent.headers["accept"] == batch.request.headers["accept"]


async def test_boto3_reads_the_recorded_invoke_error_as_we_do(fake: FakeUpstream) -> None:
    reply, body = recorded("bedrock_error")
    fake.queue(reply)

    def invoke(client: Any) -> dict[str, str | None]:
        with pytest.raises(ClientError) as caught:
            client.invoke_model(modelId=TITAN, body=b'{"inputText": "x", "dimensions": 300}')
        error = caught.value.response["Error"]
        return {"Code": error.get("Code"), "Message": error.get("Message")}

    error = await with_boto3(fake, invoke)
    ours = BedrockAdapter("aws-bedrock", counting_ids()).parse_error(
        reply.status, reply.headers, body
    )
    assert error["Code"] == "ValidationException"
    assert error["Message"] == ours.message
    assert ours.status == 400
