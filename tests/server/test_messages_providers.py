"""Every provider serves ``/v1/messages``: each one's recorded text, parallel tool call and
reasoning streams read by the anthropic SDK through a real gateway, and a request's
images and stop sequences reaching each upstream in its own format."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from anthropic import AsyncAnthropic

from tests.server.test_wire_golden import PROVIDERS, _reply, aws_environment
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import running_gateway
from tests.support.transcript import FIXTURES

__all__ = ["aws_environment"]  # its credentials, autouse here too
PIXEL = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\x00" * 8).decode()
REASONING = {"openai": "deepseek_reasoning", "anthropic": "thinking", "gemini": "thinking"}
REASONING["aws-bedrock"] = "reasoning"


def recorded(provider: str, name: str) -> dict[str, Any]:
    """What the chat door's translator made of the recording: text, reasoning, calls."""
    text, reasoning = "", ""
    calls: dict[int, dict[str, str]] = {}
    for line in (FIXTURES / provider / f"{name}.chunks.jsonl").read_text().splitlines():
        for choice in json.loads(line).get("choices", []):
            delta = choice["delta"]
            text += delta.get("content") or ""
            reasoning += delta.get("reasoning_content") or ""
            for call in delta.get("tool_calls") or []:
                entry = calls.setdefault(call["index"], {"name": "", "arguments": ""})
                entry["name"] += call["function"].get("name") or ""
                entry["arguments"] += call["function"].get("arguments") or ""
    tools = [(c["name"], json.loads(c["arguments"] or "{}")) for _, c in sorted(calls.items())]
    return {"text": text, "reasoning": reasoning, "tools": tools}


async def streamed(fake: FakeUpstream, tmp_path: Path, provider: str, name: str) -> Any:
    toml, model = PROVIDERS[provider]
    fake.queue(_reply(provider, (FIXTURES / provider / f"{name}.raw").read_bytes()))
    async with running_gateway(tmp_path, toml(fake)) as gw:
        assert gw.dev_key is not None
        client = AsyncAnthropic(base_url=gw.base_url, api_key=gw.dev_key.key, max_retries=0)
        async with (
            client,
            client.messages.stream(
                model=model, max_tokens=2000, messages=[{"role": "user", "content": "Say hello"}]
            ) as stream,
        ):
            return await stream.get_final_message()


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
@pytest.mark.parametrize("name", ["text", "parallel_tool_calls", "reasoning"])
async def test_each_providers_recorded_stream_reads_through_the_sdk(
    tmp_path: Path, fake: FakeUpstream, provider: str, name: str
) -> None:
    name = REASONING[provider] if name == "reasoning" else name
    final = await streamed(fake, tmp_path, provider, name)
    expected = recorded(provider, name)
    text = "".join(b.text for b in final.content if b.type == "text")
    thinking = "".join(b.thinking for b in final.content if b.type == "thinking")
    tools = [(b.name, b.input) for b in final.content if b.type == "tool_use"]
    assert (text, thinking, tools) == (expected["text"], expected["reasoning"], expected["tools"])
    assert final.stop_reason == ("tool_use" if tools else "end_turn")


def sent_image_and_stops(provider: str, body: dict[str, Any]) -> tuple[str, list[str]]:
    """The image data and the stop sequences as each provider's request carries them."""
    if provider == "openai":
        url = body["messages"][0]["content"][0]["image_url"]["url"]
        return url.removeprefix("data:image/png;base64,"), body["stop"]
    if provider == "anthropic":
        return body["messages"][0]["content"][0]["source"]["data"], body["stop_sequences"]
    if provider == "gemini":
        part = body["contents"][0]["parts"][0]["inlineData"]
        return part["data"], body["generationConfig"]["stopSequences"]
    image = body["messages"][0]["content"][0]["image"]["source"]["bytes"]
    return image, body["inferenceConfig"]["stopSequences"]


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
async def test_images_and_stop_sequences_reach_each_upstream(
    tmp_path: Path, fake: FakeUpstream, provider: str
) -> None:
    image = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": PIXEL},
    }
    content: Any = [image, {"type": "text", "text": "What is it?"}]
    toml, model = PROVIDERS[provider]
    fake.queue(_reply(provider, (FIXTURES / provider / "text.raw").read_bytes()))
    async with running_gateway(tmp_path, toml(fake)) as gw:
        assert gw.dev_key is not None
        client = AsyncAnthropic(base_url=gw.base_url, api_key=gw.dev_key.key, max_retries=0)
        async with (
            client,
            client.messages.stream(
                model=model,
                max_tokens=100,
                stop_sequences=["END", "\n\n"],
                messages=[{"role": "user", "content": content}],
            ) as stream,
        ):
            await stream.get_final_message()
    assert sent_image_and_stops(provider, json.loads(fake.requests[0].body)) == (
        PIXEL,
        ["END", "\n\n"],
    )
