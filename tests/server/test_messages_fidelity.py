"""A coding agent's request through an Anthropic connection: what reaches the upstream
means what the client sent (parsed bodies compared, beta headers forwarded), and the
answer's signed thinking reaches the client byte for byte."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.server.test_anthropic_gateway import config as anthropic_toml
from tests.support import fake_anthropic as fa
from tests.support.fake_upstream import FakeUpstream, Reply
from tests.support.gateway import running_gateway
from tests.support.raw_http import exchange, post

EPHEMERAL = {"type": "ephemeral"}
SIGNATURE = "ErUBCkYIBRgCIkCl+tq0zE3gDj/8yQ2cFhV9bW1s0Rk8pZ3=" * 8
BETAS = "interleaved-thinking-2025-05-14,fine-grained-tool-streaming-2025-05-14"


def tool(n: int) -> dict[str, Any]:
    schema = {
        "type": "object",
        "properties": {"path": {"type": "string"}, "limit": {"type": "integer", "minimum": 1}},
        "required": ["path"],
    }
    doc: dict[str, Any] = {
        "name": f"tool_{n:02d}",
        "description": f"Tool {n}.",
        "input_schema": schema,
    }
    if n == 19:
        doc["cache_control"] = EPHEMERAL  # agents mark the end of their tool list
    return doc


def agent_request() -> dict[str, Any]:
    return {
        "model": "test/claude",
        "max_tokens": 32000,
        "stream": True,
        "system": [
            {"type": "text", "text": "You are a coding agent."},
            {
                "type": "text",
                "text": "Project rules: keep files small.",
                "cache_control": EPHEMERAL,
            },
        ],
        "tools": [tool(n) for n in range(20)],
        "tool_choice": {"type": "auto"},
        "thinking": {"type": "enabled", "budget_tokens": 16000},
        "metadata": {"user_id": "user_abc123_session_9f"},
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Fix the failing test."}]},
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "thinking",
                        "thinking": "Read the test first.",
                        "signature": SIGNATURE,
                    },
                    {"type": "text", "text": "Reading it."},
                    {
                        "type": "tool_use",
                        "id": "toolu_01",
                        "name": "tool_00",
                        "input": {"path": "t.py"},
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_01", "content": "assert 1 == 2"},
                    {"type": "text", "text": "Go on.", "cache_control": EPHEMERAL},
                ],
            },
        ],
    }


def answer() -> list[bytes]:
    return [
        fa.message_start(1200, cache_read=900),
        fa.block_start(0, {"type": "thinking", "thinking": "", "signature": ""}),
        fa.block_delta(0, {"type": "thinking_delta", "thinking": "The assert is wrong."}),
        fa.block_delta(0, {"type": "signature_delta", "signature": SIGNATURE}),
        fa.block_stop(0),
        *fa.tool_block(1, "toolu_02", "tool_03", '{"path": "t.py"', ', "limit": 5}'),
        *fa.message_end("tool_use", fa.usage(1200, 80, cache_read=900)),
    ]


async def test_an_agents_request_reaches_the_upstream_as_sent_and_its_signature_comes_back(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    fake.queue(Reply.stream(*answer()))
    sent = agent_request()
    async with running_gateway(tmp_path, anthropic_toml(fake)) as gw:
        assert gw.dev_key is not None
        headers = f"x-api-key: {gw.dev_key.key}\r\nanthropic-version: 2023-06-01\r\n"
        headers += f"anthropic-beta: {BETAS}\r\n"
        request = post("/v1/messages", json.dumps(sent).encode(), None, extra=headers)
        reply = await exchange(gw.host, gw.port, request)
    upstream = fake.requests[0]
    assert json.loads(upstream.body) == {**sent, "model": "claude-test"}
    assert upstream.headers["anthropic-beta"] == BETAS
    assert upstream.headers["anthropic-version"] == "2023-06-01"
    assert reply.status == 200
    events = [e for e in reply.body.split(b"\n\n") if e]
    signature = json.dumps(SIGNATURE).encode()
    assert any(b'"type":"signature_delta","signature":' + signature in e for e in events)
    names = [e.split(b"\n")[0] for e in events]
    assert names == [
        b"event: message_start",
        b"event: content_block_start",
        b"event: content_block_delta",
        b"event: content_block_delta",
        b"event: content_block_stop",
        b"event: content_block_start",
        b"event: content_block_delta",
        b"event: content_block_delta",
        b"event: content_block_stop",
        b"event: message_delta",
        b"event: message_stop",
    ]
    ending = json.loads(events[-2].split(b"data: ", 1)[1])
    assert ending["delta"] == {"stop_reason": "tool_use", "stop_sequence": None}
    usage = ending["usage"]
    assert (usage["input_tokens"], usage["cache_read_input_tokens"], usage["output_tokens"]) == (
        1200,
        900,
        80,
    )
