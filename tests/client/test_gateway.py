"""End to end: the client against a real gateway serving the built-in demo models."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from sluice.client import AsyncChatClient, ChatClient, StreamResult, ToolCallFragment
from sluice.server.lifecycle import RunningGateway
from tests.support.gateway import running_gateway

INSTANT = """
[[connections]]
id = "conn_demo"
provider = "demo"
options = { first_token_ms = 0, token_ms = 0 }
"""
USER = [{"role": "user", "content": "Hello there"}]
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}
CLOCK = {"type": "function", "function": {"name": "get_time"}}


@pytest.fixture
async def gateway(tmp_path: Path) -> AsyncIterator[RunningGateway]:
    async with running_gateway(tmp_path, INSTANT) as gw:
        yield gw


def client(gw: RunningGateway, key: str | None = None) -> AsyncChatClient:
    assert gw.dev_key is not None
    return AsyncChatClient(gw.base_url + "/v1", key or gw.dev_key.key)


async def test_text_with_usage_cost_and_the_serving_route(gateway: RunningGateway) -> None:
    async with client(gateway) as c:
        result = await c.stream("sluice/demo", USER, stop=["!"]).collect()
    assert (result.state, result.text, result.finish_reason) == (
        "complete",
        "Hello from Sluice",
        "stop",
    )
    assert result.request_id is not None and result.request_id.startswith("req_")
    assert (result.model, result.provider, result.connection) == (
        "sluice/demo",
        "demo",
        "conn_demo",
    )
    assert (result.route, result.route_name) == ("primary", None)
    assert result.usage is not None and result.usage.completion_tokens == 3
    assert result.cost is not None and result.cost > 0
    assert result.usage.price_source == "list"


async def test_parallel_tool_calls_reassembled_and_parsed(gateway: RunningGateway) -> None:
    async with client(gateway) as c:
        stream = c.stream("sluice/demo", USER, tools=[WEATHER, CLOCK])
        items = [item async for item in stream]
    fragments = [i for i in items if isinstance(i, ToolCallFragment)]
    assert {f.index for f in fragments} == {0, 1}
    result = items[-1]
    assert isinstance(result, StreamResult)
    assert (result.state, result.finish_reason) == ("complete", "tool_calls")
    assert [(c.name, c.parsed) for c in result.tool_calls] == [
        ("get_weather", {"city": "demo"}),
        ("get_time", {}),
    ]
    assert all(c.id and c.id.startswith("call_") for c in result.tool_calls)


async def test_max_tokens_is_truncated_not_incomplete(gateway: RunningGateway) -> None:
    async with client(gateway) as c:
        result = await c.stream("sluice/demo-fast", USER, max_tokens=4).collect()
    assert (result.state, result.finish_reason, result.ok) == ("truncated", "length", True)
    assert result.text == "Hello from Sluice! This "


@pytest.mark.parametrize(
    ("model", "key", "kind", "status"),
    [
        ("sluice/demo", "sk-wrong", "authentication_error", 401),
        ("nobody/none", None, "model_not_found", 404),
    ],
)
async def test_typed_errors_are_not_retried(
    gateway: RunningGateway, model: str, key: str | None, kind: str, status: int
) -> None:
    async with client(gateway, key) as c:
        result = await c.stream(model, USER).collect()
    assert result.error is not None
    assert (result.state, result.error.type, result.error.status) == ("error", kind, status)
    assert result.attempts == 1
    assert result.request_id is not None and result.request_id.startswith("req_")


async def test_the_sync_client_reads_the_same_answer(gateway: RunningGateway) -> None:
    assert gateway.dev_key is not None
    sync = ChatClient(gateway.base_url + "/v1", gateway.dev_key.key)
    result = await asyncio.to_thread(lambda: sync.stream("sluice/demo", USER, stop=["!"]).collect())
    assert (result.state, result.text, result.provider) == ("complete", "Hello from Sluice", "demo")
