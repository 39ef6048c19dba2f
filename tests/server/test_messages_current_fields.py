"""What a current Messages client (Claude Code 2.1) sends, through a real gateway:
adaptive thinking with ``display``, ``output_config`` (effort and a format),
``context_management``, deferred tools, a system turn inside ``messages`` with its own
``output_config``, fields newer than this gateway. To an Anthropic upstream every field
arrives as sent, only the model renamed; every other provider serves the request with
the fields it has no use for left out; what the gateway does not serve is a precise 400.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.server.test_wire_golden import PROVIDERS, _reply, aws_environment
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import running_gateway
from tests.support.transcript import FIXTURES

__all__ = ["aws_environment"]
SYSTEM_TURN = "Environment: the working directory is /srv/app."
ANTHROPIC_ONLY = ("context_management", "output_config", "defer_loading", "speculative_field")


def current_body(model: str) -> dict[str, Any]:
    """Claude Code's shape, written here (its prompts are not copied)."""
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    return {
        "model": model,
        "max_tokens": 32000,
        "system": [
            {"type": "text", "text": "billing-header: cc_version=2.1"},
            {
                "type": "text",
                "text": "You are a coding agent.",
                "cache_control": {"type": "ephemeral"},
            },
        ],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "List the files."}]},
            {
                "role": "system",
                "content": [{"type": "text", "text": SYSTEM_TURN}],
                "output_config": {"effort": "medium"},
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "Use Bash.", "signature": "c2lnbmVk"},
                    {
                        "type": "tool_use",
                        "id": "toolu_1",
                        "name": "Bash",
                        "input": {"command": "ls"},
                    },
                ],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.py"}],
            },
        ],
        "tools": [
            {"name": "Bash", "description": "Run a command.", "input_schema": schema},
            {
                "name": "Later",
                "description": "Loaded on demand.",
                "input_schema": schema,
                "defer_loading": True,
            },
        ],
        "metadata": {"user_id": json.dumps({"device_id": "d" * 64, "session_id": "s-1"})},
        "thinking": {"type": "adaptive", "display": "omitted"},
        "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
        "output_config": {"effort": "max", "format": {"type": "json_schema", "schema": schema}},
        "speculative_field": {"nested": [1, 2, {"x": None}]},
        "stream": True,
    }


class Answer:
    def __init__(self, status: int, text: str) -> None:
        self.status_code, self.text = status, text

    def json(self) -> Any:
        return json.loads(self.text)


async def send(url: str, body: dict[str, Any], headers: dict[str, str]) -> Answer:
    async with (
        aiohttp.ClientSession() as session,
        session.post(url, json=body, headers=headers) as r,
    ):
        return Answer(r.status, await r.text())


async def post(gw_url: str, key: str, body: dict[str, Any]) -> Answer:
    headers = {"x-api-key": key, "anthropic-version": "2023-06-01"}
    headers["anthropic-beta"] = "context-management-2025-06-27,effort-2025-11-24"
    return await send(gw_url + "/v1/messages?beta=true", body, headers)


async def test_an_anthropic_upstream_receives_every_field_as_sent(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    toml, model = PROVIDERS["anthropic"]
    fake.queue(_reply("anthropic", (FIXTURES / "anthropic" / "text.raw").read_bytes()))
    sent = current_body(model) | {"service_tier": "priority"}
    async with running_gateway(tmp_path, toml(fake)) as gw:
        assert gw.dev_key is not None
        answer = await post(gw.base_url, gw.dev_key.key, sent)
    assert answer.status_code == 200, answer.text
    expected = copy.deepcopy(sent)
    expected["model"] = "claude-test"
    del expected["service_tier"]  # priced as the standard tier: not forwarded
    assert fake.requests[0].json() == expected
    betas = fake.requests[0].headers["anthropic-beta"]
    assert betas == "context-management-2025-06-27,effort-2025-11-24"


@pytest.mark.parametrize("provider", ["openai", "gemini", "aws-bedrock"])
async def test_every_other_provider_serves_it_without_the_fields_it_cannot_take(
    tmp_path: Path, fake: FakeUpstream, provider: str
) -> None:
    toml, model = PROVIDERS[provider]
    fake.queue(_reply(provider, (FIXTURES / provider / "text.raw").read_bytes()))
    async with running_gateway(tmp_path, toml(fake)) as gw:
        assert gw.dev_key is not None
        answer = await post(gw.base_url, gw.dev_key.key, current_body(model))
    assert answer.status_code == 200, answer.text
    assert "event: message_stop" in answer.text
    upstream = fake.requests[0].body.decode()
    assert SYSTEM_TURN in upstream  # the system turn reached the model, in its form
    for field in ANTHROPIC_ONLY:
        assert field not in upstream


async def test_effort_and_format_reach_an_openai_upstream_mapped(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    toml, model = PROVIDERS["openai"]
    fake.queue(_reply("openai", (FIXTURES / "openai" / "text.raw").read_bytes()))
    async with running_gateway(tmp_path, toml(fake)) as gw:
        assert gw.dev_key is not None
        answer = await post(gw.base_url, gw.dev_key.key, current_body(model))
    assert answer.status_code == 200, answer.text
    body = fake.requests[0].json()
    assert body["reasoning_effort"] == "xhigh"  # adaptive thinking, effort "max"
    assert body["response_format"]["type"] == "json_schema"
    assert [m["role"] for m in body["messages"]] == [
        "system",
        "user",
        "system",
        "assistant",
        "tool",
    ]
    assert body["messages"][2] == {
        "role": "system",
        "content": [{"type": "text", "text": SYSTEM_TURN}],
    }


@pytest.mark.parametrize(
    ("change", "param"),
    [
        (
            {"mcp_servers": [{"type": "url", "url": "https://mcp.example", "name": "x"}]},
            "mcp_servers",
        ),
        ({"container": "container_1"}, "container"),
        (
            {
                "messages": [
                    {"role": "user", "content": "hi"},
                    {
                        "role": "system",
                        "content": [
                            {"type": "image", "source": {"type": "url", "url": "https://x/y.png"}}
                        ],
                    },
                ]
            },
            "messages[1].content[0]",
        ),
        ({"thinking": {"type": "sometimes"}}, "thinking.type"),
    ],
)
async def test_what_is_not_served_is_a_precise_400_and_nothing_goes_upstream(
    tmp_path: Path, fake: FakeUpstream, change: dict[str, Any], param: str
) -> None:
    toml, model = PROVIDERS["anthropic"]
    async with running_gateway(tmp_path, toml(fake)) as gw:
        assert gw.dev_key is not None
        answer = await post(gw.base_url, gw.dev_key.key, current_body(model) | change)
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["param"] == param
    assert fake.requests == []


async def test_a_chat_client_cannot_set_the_kept_fields(tmp_path: Path, fake: FakeUpstream) -> None:
    """``native`` is the Messages door's to fill: a chat body's is dropped."""
    toml, model = PROVIDERS["anthropic"]
    fake.queue(_reply("anthropic", (FIXTURES / "anthropic" / "text.raw").read_bytes()))
    native = {"wire": "messages", "fields": {"mcp_servers": [{"url": "https://evil"}]}}
    body = {"model": model, "messages": [{"role": "user", "content": "hi"}], "stream": True}
    body["native"] = native
    async with running_gateway(tmp_path, toml(fake)) as gw:
        assert gw.dev_key is not None
        headers = {"authorization": f"Bearer {gw.dev_key.key}"}
        answer = await send(gw.base_url + "/v1/chat/completions", body, headers)
    assert answer.status_code == 200, answer.text
    assert b"mcp_servers" not in fake.requests[0].body


@pytest.mark.parametrize("provider", ["openai", "gemini"])
async def test_message_start_carries_an_estimated_prompt_count_corrected_at_the_end(
    tmp_path: Path, fake: FakeUpstream, provider: str
) -> None:
    """Claude Code shows a message's cost from ``message_start``: where the upstream
    reports usage only at the end, the start carries the gateway's estimate."""
    toml, model = PROVIDERS[provider]
    fake.queue(_reply(provider, (FIXTURES / provider / "text.raw").read_bytes()))
    async with running_gateway(tmp_path, toml(fake)) as gw:
        assert gw.dev_key is not None
        answer = await post(gw.base_url, gw.dev_key.key, current_body(model))
    assert answer.status_code == 200, answer.text
    events = [
        json.loads(line[len("data: ") :])
        for line in answer.text.splitlines()
        if line.startswith("data: ")
    ]
    start = next(e for e in events if e["type"] == "message_start")["message"]["usage"]
    end = next(e for e in events if e["type"] == "message_delta")["usage"]
    assert start["input_tokens"] > 0
    assert end["input_tokens"] > 0
