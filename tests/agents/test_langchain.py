"""LangChain's ``ChatOpenAI(use_responses_api=True)`` (``langchain-openai``), unchanged,
against ``/v1/responses``: a whole answer, a stream folded into one message, and a
bound tool whose call comes back as LangChain's ``tool_calls``."""

from __future__ import annotations

from pathlib import Path

from langchain_core.messages import AIMessageChunk
from langchain_openai import ChatOpenAI
from pydantic import SecretStr

from tests.agents.test_openai_agents import MODEL, config, weather_turn
from tests.support.fake_upstream import responding
from tests.support.gateway import running_gateway


def chat_model(base_url: str, key: str) -> ChatOpenAI:
    return ChatOpenAI(
        model=MODEL,
        base_url=base_url + "/v1",
        api_key=SecretStr(key),
        use_responses_api=True,
        max_retries=0,
    )


def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


async def test_langchain_calls_a_tool_and_reads_the_answer_whole_and_streamed(
    tmp_path: Path,
) -> None:
    async with responding(weather_turn) as fake, running_gateway(tmp_path, config(fake)) as gw:
        assert gw.dev_key is not None
        model = chat_model(gw.base_url, gw.dev_key.key).bind_tools([get_weather])
        asked = await model.ainvoke("Weather in Oslo?")
        streamed: AIMessageChunk | None = None
        async for piece in model.astream("Weather in Oslo?"):
            assert isinstance(piece, AIMessageChunk)
            streamed = piece if streamed is None else streamed + piece
    for message in (asked, streamed):
        assert message is not None
        [call] = message.tool_calls
        assert (call["name"], call["args"], call["id"]) == (
            "get_weather",
            {"city": "Oslo"},
            "call_w",
        )
    sent = [r.json() for r in fake.requests]
    assert [body.get("stream") is True for body in sent] == [False, True]
    assert sent[0]["tools"][0]["function"]["name"] == "get_weather"
