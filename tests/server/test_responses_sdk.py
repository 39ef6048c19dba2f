"""``POST /v1/responses`` read by the official openai SDK, over real sockets: every
provider's recorded text, tool-call and reasoning streams through the Responses
encoder, folded by the SDK's own stream accumulator into its final response; whole
answers; a function call round trip; errors in OpenAI's shape."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from openai import AsyncOpenAI, BadRequestError

from sluice.server.lifecycle import RunningGateway
from tests.server.test_messages_providers import recorded
from tests.server.test_wire_golden import PROVIDERS, _reply, aws_environment
from tests.support.fake_openai import DONE, chunk, completion
from tests.support.fake_upstream import FakeUpstream, Reply
from tests.support.gateway import openai_connection_toml, running_gateway
from tests.support.transcript import FIXTURES

__all__ = ["aws_environment"]
WEATHER_TOOL: Any = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    "strict": False,
}


def sdk(gw: RunningGateway) -> AsyncOpenAI:
    assert gw.dev_key is not None
    return AsyncOpenAI(base_url=gw.base_url + "/v1", api_key=gw.dev_key.key, max_retries=0)


def summary(response: Any) -> dict[str, Any]:
    """What the SDK's final response holds: text, reasoning, calls (name, arguments)."""
    text, reasoning, calls = "", "", []
    for item in response.output:
        if item.type == "message":
            text += "".join(part.text for part in item.content)
        elif item.type == "reasoning":
            reasoning += "".join(part.text for part in item.summary)
        elif item.type == "function_call":
            calls.append((item.name, json.loads(item.arguments or "{}")))
    return {"text": text, "reasoning": reasoning, "tools": calls}


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
@pytest.mark.parametrize("name", ["text", "parallel_tool_calls", "reasoning"])
async def test_each_providers_recorded_stream_folds_into_the_final_response(
    tmp_path: Path, fake: FakeUpstream, provider: str, name: str
) -> None:
    fixture = {"reasoning": {"openai": "deepseek_reasoning", "aws-bedrock": "reasoning"}}
    file = fixture.get(name, {}).get(provider, "thinking" if name == "reasoning" else name)
    raw = FIXTURES / provider / f"{file}.raw"
    if not raw.exists():
        pytest.skip(f"no {file} recording for {provider}")
    toml, model = PROVIDERS[provider]
    fake.queue(_reply(provider, raw.read_bytes()))
    async with running_gateway(tmp_path, toml(fake)) as gw, sdk(gw) as client:
        async with client.responses.stream(model=model, input="Say hello") as stream:
            kinds = [event.type async for event in stream]
            final: Any = await stream.get_final_response()
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.completed"
    assert final.status == "completed"
    assert final.id.startswith("resp_")
    assert summary(final) == recorded(provider, file)
    assert final.usage is not None and final.usage.total_tokens > 0
    for item in final.output:
        assert item.id  # every item named, as input_items pages need


async def test_events_follow_the_item_lifecycle_in_sequence(tmp_path: Path) -> None:
    async with running_gateway(tmp_path) as gw, sdk(gw) as client:
        stream = await client.responses.create(model="sluice/demo", input="Hello", stream=True)
        events: list[Any] = [event async for event in stream]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    kinds = [e.type for e in events]
    assert kinds[:4] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
    ]
    assert kinds[-4:] == [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    completed = events[-1].response
    assert completed.output_text == deltas
    assert completed.usage.input_tokens > 0
    assert completed.model_extra["provider"] == "demo"


async def test_a_whole_answer_is_the_same_response_object(tmp_path: Path) -> None:
    async with running_gateway(tmp_path) as gw, sdk(gw) as client:
        response: Any = await client.responses.create(
            model="sluice/demo",
            instructions="Be brief.",
            input=[{"role": "user", "content": "Hello"}],
            metadata={"ticket": "42"},
            temperature=0.5,
        )
    assert response.object == "response"
    assert response.status == "completed"
    assert response.output_text
    assert response.instructions == "Be brief."
    assert response.metadata == {"ticket": "42"}
    assert response.temperature == 0.5
    usage = response.usage
    assert usage is not None
    assert usage.total_tokens == usage.input_tokens + usage.output_tokens
    assert isinstance(usage.model_extra["cost"], float)


async def test_a_function_call_round_trip(tmp_path: Path, fake: FakeUpstream) -> None:
    call = {"index": 0, "id": "call_1", "type": "function"}
    fake.queue(
        Reply.stream(
            chunk(role="assistant", content=""),
            chunk(tool_calls=[{**call, "function": {"name": "get_weather", "arguments": ""}}]),
            chunk(tool_calls=[{"index": 0, "function": {"arguments": '{"city":'}}]),
            chunk(tool_calls=[{"index": 0, "function": {"arguments": '"Oslo"}'}}]),
            chunk(finish="tool_calls"),
            chunk(usage={"prompt_tokens": 20, "completion_tokens": 5}, choices=False),
            DONE,
        ),
        Reply.json(completion("It is sunny.", usage={"prompt_tokens": 30, "completion_tokens": 4})),
    )
    async with running_gateway(tmp_path, openai_connection_toml(fake.base_url)) as gw:
        async with sdk(gw) as client:
            async with client.responses.stream(
                model="test/gpt-fake", input="Weather in Oslo?", tools=[WEATHER_TOOL]
            ) as stream:
                first: Any = await stream.get_final_response()
            [fc] = [item for item in first.output if item.type == "function_call"]
            assert (fc.name, json.loads(fc.arguments), fc.call_id) == (
                "get_weather",
                {"city": "Oslo"},
                "call_1",
            )
            history: list[Any] = [
                {"role": "user", "content": "Weather in Oslo?"},
                {
                    "type": "function_call",
                    "call_id": fc.call_id,
                    "name": fc.name,
                    "arguments": fc.arguments,
                },
                {"type": "function_call_output", "call_id": fc.call_id, "output": "sunny, 21C"},
            ]
            second: Any = await client.responses.create(
                model="test/gpt-fake", input=history, tools=[WEATHER_TOOL]
            )
    assert second.output_text == "It is sunny."
    sent = fake.requests[1].json()
    assert sent["messages"][1]["tool_calls"][0]["function"] == {
        "name": "get_weather",
        "arguments": '{"city":"Oslo"}',
    }
    assert sent["messages"][2] == {
        "role": "tool",
        "content": "sunny, 21C",
        "tool_call_id": "call_1",
    }
    assert sent["tools"][0]["function"]["name"] == "get_weather"


@pytest.mark.parametrize(
    ("body", "param", "code"),
    [
        ({"input": [{"type": "mystery"}]}, "input[0].type", "invalid_value"),
        (
            {"input": [{"type": "function_call_output", "call_id": "call_9", "output": "x"}]},
            "input[0].call_id",
            "invalid_value",
        ),
        (
            {"input": "hi", "previous_response_id": "resp_abc"},
            "previous_response_id",
            "previous_response_not_found",
        ),
        (
            {"input": [{"role": "user", "content": [{"type": "input_video"}]}]},
            "input[0].content[0].type",
            None,
        ),
    ],
)
async def test_bad_input_is_a_precise_400_and_nothing_goes_upstream(
    tmp_path: Path, fake: FakeUpstream, body: dict[str, Any], param: str, code: str | None
) -> None:
    async with running_gateway(tmp_path, openai_connection_toml(fake.base_url)) as gw:
        async with sdk(gw) as client:
            with pytest.raises(BadRequestError) as caught:
                await client.responses.create(model="test/gpt-fake", **body)
    error = caught.value.body
    assert isinstance(error, dict)
    assert error["param"] == param
    if code is not None:
        assert error["code"] == code
    assert fake.requests == []


async def test_input_tokens_counts_a_responses_prompt_as_a_hold_would(tmp_path: Path) -> None:
    """``POST /v1/responses/input_tokens``: the gateway's estimate where no provider
    counts (the demo), in OpenAI's shape; more input, more tokens; logged as a count."""
    async with running_gateway(tmp_path) as gw, sdk(gw) as client:
        short = await client.responses.input_tokens.count(model="sluice/demo", input="Hi")
        longer = await client.responses.input_tokens.count(
            model="sluice/demo", instructions="Be brief.", input="Hi " * 200
        )
        with pytest.raises(BadRequestError) as caught:
            await client.responses.input_tokens.count(
                model="sluice/demo",
                input=[{"type": "mystery"}],  # type: ignore[list-item,misc]
            )
    assert short.object == "response.input_tokens"
    assert 0 < short.input_tokens < longer.input_tokens
    assert isinstance(caught.value.body, dict)
    assert caught.value.body["param"] == "input[0].type"


async def test_hosted_tools_are_left_out_and_named_in_a_header(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    """Codex offers web_search by default: no upstream Sluice reaches runs it, so it is
    left out (never a 400 that stops the agent) and the answer says so."""
    fake.queue(Reply.json(completion("Hi.", usage={"prompt_tokens": 5, "completion_tokens": 1})))
    hosted: list[Any] = [
        {"type": "web_search"},
        {"type": "file_search", "vector_store_ids": ["vs_1"]},
        {"type": "evil\r\nset-cookie: x"},
        WEATHER_TOOL,
    ]
    async with running_gateway(tmp_path, openai_connection_toml(fake.base_url)) as gw:
        async with sdk(gw) as client:
            raw = await client.responses.with_raw_response.create(
                model="test/gpt-fake", input="Hi", tools=hosted
            )
            row: Any = await client.get(f"/requests/{raw.headers['x-request-id']}", cast_to=object)
    assert raw.headers["x-sluice-omitted-tools"] == "web_search, file_search, other"
    assert row["omitted_tools"] == ["web_search", "file_search", "other"]
    assert "set-cookie" not in raw.headers
    assert raw.parse().output_text == "Hi."
    sent = fake.requests[0].json()
    assert [tool["function"]["name"] for tool in sent["tools"]] == ["get_weather"]
