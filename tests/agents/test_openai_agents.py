"""The OpenAI Agents SDK (``openai-agents``), unchanged: its default model provider
speaks the Responses API, pointed at Sluice with ``set_default_openai_client``. An
agent with a function tool, through ``Runner.run`` (whole answers) and
``Runner.run_streamed``, over an OpenAI-format upstream: the tool's result comes back
in the second turn and into the final output."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import agents
import pytest
from openai import AsyncOpenAI

from tests.support.fake_openai import DONE, chunk, completion
from tests.support.fake_upstream import FakeUpstream, Recorded, Reply
from tests.support.gateway import openai_connection_toml, running_gateway

USAGE = {"prompt_tokens": 40, "completion_tokens": 6}
MODEL = "forecast-model"
"""Without a ``/``: the SDK reads ``x/y`` as its own provider prefix ``x``."""


def config(fake: FakeUpstream) -> str:
    return (
        openai_connection_toml(fake.base_url)
        + f"""
[[models]]
id = "{MODEL}"
providers = {{ conn_fake = "gpt-fake" }}
price = {{ input = 2.0, output = 8.0 }}
"""
    )


def weather_turn(request: Recorded) -> Reply:
    """A call of get_weather first; with its result, an answer quoting it."""
    body = request.json()
    last = body["messages"][-1]
    stream = body.get("stream") is True
    if last["role"] != "tool":
        call = {"id": "call_w", "type": "function"}
        arguments = json.dumps({"city": "Oslo"})
        if not stream:
            fn = {**call, "function": {"name": "get_weather", "arguments": arguments}}
            return Reply.json(completion(None, tool_calls=[fn], usage=USAGE))
        return Reply.stream(
            chunk(role="assistant", content=""),
            chunk(
                tool_calls=[
                    {"index": 0, **call, "function": {"name": "get_weather", "arguments": ""}}
                ]
            ),
            chunk(tool_calls=[{"index": 0, "function": {"arguments": arguments}}]),
            chunk(finish="tool_calls"),
            chunk(usage=USAGE, choices=False),
            DONE,
        )
    text = f"The tool said: {last['content']}"
    if not stream:
        return Reply.json(completion(text, usage=USAGE))
    return Reply.stream(
        chunk(role="assistant", content=""),
        chunk(content=text),
        chunk(finish="stop"),
        chunk(usage=USAGE, choices=False),
        DONE,
    )


def weather_agent() -> Any:
    @agents.function_tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return f"sunny, 21C in {city}"

    return agents.Agent(
        name="forecaster",
        instructions="Answer with the tool.",
        model=MODEL,
        tools=[get_weather],
    )


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "run_streamed"])
async def test_an_agent_with_a_function_tool_runs_through_the_responses_door(
    tmp_path: Path, streamed: bool
) -> None:
    fake = FakeUpstream()
    fake.responder = weather_turn
    await fake.start()
    agents.set_tracing_disabled(True)
    try:
        async with running_gateway(tmp_path, config(fake)) as gw:
            assert gw.dev_key is not None
            client = AsyncOpenAI(base_url=gw.base_url + "/v1", api_key=gw.dev_key.key)
            agents.set_default_openai_client(client, use_for_tracing=False)
            agents.set_default_openai_api("responses")
            result: agents.RunResult | agents.RunResultStreaming
            if streamed:
                result = agents.Runner.run_streamed(weather_agent(), "Weather in Oslo?")
                kinds = [event.type async for event in result.stream_events()]
                assert "raw_response_event" in kinds
            else:
                result = await agents.Runner.run(weather_agent(), "Weather in Oslo?")
            await client.close()
    finally:
        await fake.close()
    assert result.final_output == "The tool said: sunny, 21C in Oslo"
    turns = [r.json() for r in fake.requests]
    assert len(turns) == 2
    assert turns[0]["tools"][0]["function"]["name"] == "get_weather"
    assert turns[1]["messages"][-1] == {
        "role": "tool",
        "content": "sunny, 21C in Oslo",
        "tool_call_id": "call_w",
    }
