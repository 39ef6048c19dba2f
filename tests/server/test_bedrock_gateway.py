"""The official openai SDK through the gateway to a fake Bedrock, SigV4-signed by the
transport with credentials from the AWS chain (here: the environment)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from openai import APIError, AsyncOpenAI, BadRequestError
from openai.types.chat import ChatCompletionMessageFunctionToolCall, ChatCompletionMessageParam

from sluice.server.lifecycle import RunningGateway
from tests.support.fake_bedrock import converse_response, error_reply, stream_reply
from tests.support.fake_upstream import FakeUpstream, Recorded, Reply
from tests.support.gateway import running_gateway
from tests.support.transcript import FIXTURES

ACCESS_KEY = "AKIDEXAMPLE"
SECRET_KEY = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
USER: list[ChatCompletionMessageParam] = [{"role": "user", "content": "Say hello"}]
STREAM_PATH = "/model/anthropic.claude-test-v1%3A0/converse-stream"


@pytest.fixture(autouse=True)
def aws_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Credentials from the environment; nothing else of the chain reaches anywhere."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    for name in ("AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_BEARER_TOKEN_BEDROCK"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/aws-config")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/aws-credentials")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def bedrock_toml(fake: FakeUpstream) -> str:
    return f"""
[[connections]]
id = "conn_bedrock"
provider = "aws-bedrock"
base_url = "{fake.root_url}"
region = "us-east-1"

[[models]]
id = "test/claude-bedrock"
providers = {{ conn_bedrock = "anthropic.claude-test-v1:0" }}
price = {{ input = 3.0, output = 15.0, cache_read = 0.3, cache_write = 3.75 }}
"""


def sdk(gw: RunningGateway) -> AsyncOpenAI:
    assert gw.dev_key is not None
    return AsyncOpenAI(base_url=gw.base_url + "/v1", api_key=gw.dev_key.key, max_retries=0)


def raw(name: str) -> bytes:
    return (FIXTURES / "aws-bedrock" / f"{name}.raw").read_bytes()


def extra(obj: Any) -> dict[str, Any]:
    return dict(obj.model_extra or {})


async def test_streams_text_with_cache_usage_signed_with_sigv4(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    fake.queue(stream_reply(raw("prompt_cache")))
    async with running_gateway(tmp_path, bedrock_toml(fake)) as gw, sdk(gw) as client:
        stream = await client.chat.completions.create(
            model="test/claude-bedrock",
            messages=USER,
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = [c async for c in stream]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Based on the document, the term is 12 months."
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert {extra(c)["provider"] for c in chunks} == {"aws-bedrock"}
    usage = chunks[-1].usage
    assert usage is not None and usage.prompt_tokens_details is not None
    assert (usage.prompt_tokens, usage.completion_tokens) == (14 + 1536 + 256, 11)
    assert usage.prompt_tokens_details.cached_tokens == 1536
    sent = fake.requests[0]
    assert sent.method == "POST"
    assert sent.path in (STREAM_PATH, STREAM_PATH.replace("%3A", ":"))
    assert sent.json() == {"messages": [{"role": "user", "content": [{"text": "Say hello"}]}]}
    auth = sent.headers["authorization"]
    assert auth.startswith(f"AWS4-HMAC-SHA256 Credential={ACCESS_KEY}/")
    assert "/us-east-1/bedrock/aws4_request" in auth
    assert "x-amz-date" in sent.headers


def aws_would_accept(sent: Recorded, root_url: str) -> bool:
    """Check the signature the way AWS does: from the path exactly as received."""
    fields = dict(
        part.strip().split("=", 1)
        for part in sent.headers["authorization"].removeprefix("AWS4-HMAC-SHA256 ").split(",")
    )
    signed = {name: sent.headers[name] for name in fields["SignedHeaders"].split(";")}
    request = AWSRequest(
        method=sent.method, url=root_url + sent.path, data=sent.body, headers=signed
    )
    request.context["timestamp"] = sent.headers["x-amz-date"]
    signer = SigV4Auth(Credentials(ACCESS_KEY, SECRET_KEY), "bedrock", "us-east-1")
    canonical = signer.canonical_request(request)
    return bool(
        signer.signature(signer.string_to_sign(request, canonical), request) == fields["Signature"]
    )


async def test_the_signature_holds_for_the_path_as_sent(tmp_path: Path, fake: FakeUpstream) -> None:
    fake.queue(stream_reply(raw("text")))
    async with running_gateway(tmp_path, bedrock_toml(fake)) as gw, sdk(gw) as client:
        stream = await client.chat.completions.create(
            model="test/claude-bedrock", messages=USER, stream=True
        )
        _ = [c async for c in stream]
    assert fake.requests[0].path == STREAM_PATH
    assert aws_would_accept(fake.requests[0], fake.root_url)


@pytest.mark.parametrize(
    ("fixture", "expected"),
    [
        ("tool_call_fragments", [("get_weather", {"city": "Berlin", "unit": "celsius"})]),
        ("parallel_tool_calls", [("get_weather", {"city": "Paris"}), ("get_time", {"tz": "CET"})]),
        ("text_then_tool", [("get_weather", {"city": "Oslo"})]),
    ],
)
async def test_tool_arguments_reassemble_to_the_exact_json(
    tmp_path: Path, fake: FakeUpstream, fixture: str, expected: list[tuple[str, Any]]
) -> None:
    fake.queue(stream_reply(raw(fixture)))
    async with (
        running_gateway(tmp_path, bedrock_toml(fake)) as gw,
        sdk(gw) as client,
        client.chat.completions.stream(model="test/claude-bedrock", messages=USER) as stream,
    ):
        final = await stream.get_final_completion()
    choice = final.choices[0]
    assert choice.finish_reason == "tool_calls"
    calls = choice.message.tool_calls or []
    assert [(c.function.name, json.loads(c.function.arguments)) for c in calls] == expected
    assert all(c.id.startswith("tooluse_") for c in calls)


async def test_mid_stream_exception_frame_ends_with_the_error_event(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    fake.queue(stream_reply(raw("error_midstream")))
    seen = []
    async with running_gateway(tmp_path, bedrock_toml(fake)) as gw, sdk(gw) as client:
        stream = await client.chat.completions.create(
            model="test/claude-bedrock", messages=USER, stream=True
        )
        with pytest.raises(APIError) as info:
            async for chunk in stream:
                seen.append(chunk)
    assert "".join(c.choices[0].delta.content or "" for c in seen if c.choices) == "Partial answer"
    assert "invalid sequence" in info.value.message
    body: Any = info.value.body
    assert body["code"] == "upstream_model_error"


async def test_non_stream_completion(tmp_path: Path, fake: FakeUpstream) -> None:
    content: list[dict[str, Any]] = [
        {"text": "Hello there."},
        {"toolUse": {"toolUseId": "tooluse_x", "name": "wave", "input": {"times": 2}}},
    ]
    fake.queue(Reply.json(converse_response(content, stop="tool_use")))
    async with running_gateway(tmp_path, bedrock_toml(fake)) as gw, sdk(gw) as client:
        result = await client.chat.completions.create(model="test/claude-bedrock", messages=USER)
    message = result.choices[0].message
    assert message.content == "Hello there."
    assert message.tool_calls is not None
    call = message.tool_calls[0]
    assert isinstance(call, ChatCompletionMessageFunctionToolCall)
    assert json.loads(call.function.arguments) == {"times": 2}
    assert result.choices[0].finish_reason == "tool_calls"
    assert result.usage is not None and result.usage.total_tokens == 16
    assert fake.requests[0].path.endswith("/converse")


async def test_validation_error_reaches_the_client_as_a_bad_request(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    fake.queue(error_reply(400, "ValidationException", "The model returned: input too long"))
    async with running_gateway(tmp_path, bedrock_toml(fake)) as gw, sdk(gw) as client:
        with pytest.raises(BadRequestError) as info:
            await client.chat.completions.create(
                model="test/claude-bedrock", messages=USER, stream=True
            )
    assert "input too long" in info.value.message
    assert len(fake.requests) == 1
