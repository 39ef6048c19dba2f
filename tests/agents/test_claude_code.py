"""Claude Code (``@anthropic-ai/claude-code``, pinned in tests/node), unchanged and run as
users run it: ``claude -p`` with no model variables, so it asks for its own default
model with its own settings (adaptive thinking, ``context_management``,
``output_config``, deferred tools, a system turn inside ``messages``, its beta headers).
Each run makes a tool round trip through Sluice: the upstream asks for the Bash tool,
Claude Code runs the command, and the command's output (computed by the shell) comes
back in the next request and into the answer.

To an Anthropic upstream every field Claude Code sent must arrive as sent (only the
model renamed), and the signed thinking block of the tool-use turn must come back byte
for byte (the fake refuses the turn otherwise, as the real API does). To an
OpenAI-format upstream the same run works on the mapped request.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from tests.agents import cli
from tests.support import fake_anthropic as fa
from tests.support.fake_openai import DONE, chunk
from tests.support.fake_upstream import FakeUpstream, Recorded, Reply
from tests.support.gateway import openai_connection_toml, running_gateway

DEFAULT_MODEL = "claude-opus-5-5"
"""The model Claude Code 2.1.328 asks for when no variable names one."""
NATIVE_MODEL = "claude-upstream-name"
COMMAND = "echo sluice-$((6*7))"
THOUGHT = "The user wants the command run; I will use Bash."
SIGNATURE = "EqQBCkYIBxgCKkDsignedByTheFakeUpstream0123456789abcdef=="
PROMPT = f"Run the shell command `{COMMAND}` with the Bash tool and tell me what it printed."


async def run_claude(base_url: str, key: str, home: Path) -> tuple[int, str, str]:
    """``claude -p`` as a user runs it: base URL and key, no model variables."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE_"))}
    env |= {"HOME": str(home), "ANTHROPIC_BASE_URL": base_url, "ANTHROPIC_API_KEY": key}
    env |= {"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1"}
    return await cli.run("claude", ["-p", PROMPT, "--allowedTools", "Bash"], home / "work", env)


def tool_output(body: dict[str, Any]) -> str | None:
    """The text of the last tool result in an Anthropic request, if it holds one."""
    last = body["messages"][-1]
    content = last["content"] if isinstance(last["content"], list) else []
    for block in content:
        if block.get("type") == "tool_result":
            result = block.get("content")
            if isinstance(result, list):
                return "".join(b.get("text", "") for b in result)
            return str(result)
    return None


def anthropic_turn(request: Recorded) -> Reply:
    """First turn: signed thinking and a Bash call; with the tool's result: the answer,
    unless the signed thinking block did not come back as issued (400, as Anthropic)."""
    body = request.json()
    output = tool_output(body)
    if output is None:
        return Reply.stream(
            fa.message_start(input_tokens=1200),
            *thinking_block(0),
            *fa.tool_block(1, "toolu_01", "Bash", json.dumps({"command": COMMAND})),
            *fa.message_end("tool_use", fa.usage(1200, 40)),
        )
    assistant = body["messages"][-2]
    thinking = [b for b in assistant["content"] if b.get("type") == "thinking"]
    if thinking != [{"type": "thinking", "thinking": THOUGHT, "signature": SIGNATURE}]:
        message = "messages.1.content.0: Invalid `signature` in `thinking` block"
        return Reply.json(fa.error_body("invalid_request_error", message), status=400)
    return Reply.stream(*fa.text_stream(f"The command printed {output.strip()}."))


def thinking_block(index: int) -> list[bytes]:
    return [
        fa.block_start(index, {"type": "thinking", "thinking": "", "signature": ""}),
        fa.block_delta(index, {"type": "thinking_delta", "thinking": THOUGHT}),
        fa.block_delta(index, {"type": "signature_delta", "signature": SIGNATURE}),
        fa.block_stop(index),
    ]


def openai_turn(request: Recorded) -> Reply:
    body = request.json()
    last = body["messages"][-1]
    if last["role"] != "tool":
        call = {"index": 0, "id": "call_1", "type": "function"}
        arguments = json.dumps({"command": COMMAND})
        return Reply.stream(
            chunk(role="assistant", content=""),
            chunk(tool_calls=[{**call, "function": {"name": "Bash", "arguments": arguments}}]),
            chunk(finish="tool_calls"),
            chunk(usage={"prompt_tokens": 900, "completion_tokens": 20}, choices=False),
            DONE,
        )
    content = last["content"]
    text = content if isinstance(content, str) else "".join(p["text"] for p in content)
    return Reply.stream(
        chunk(role="assistant", content=""),
        chunk(content=f"The command printed {text.strip()}."),
        chunk(finish="stop"),
        chunk(usage={"prompt_tokens": 950, "completion_tokens": 8}, choices=False),
        DONE,
    )


def anthropic_toml(fake: FakeUpstream) -> str:
    return f"""
[[connections]]
id = "conn_claude"
provider = "anthropic"
base_url = "{fake.root_url}"
api_key_env = "FAKE_UPSTREAM_KEY"

[[models]]
id = "{DEFAULT_MODEL}"
providers = {{ conn_claude = "{NATIVE_MODEL}" }}
price = {{ input = 5.0, output = 25.0, cache_read = 0.5, cache_write = 6.25 }}
"""


def openai_toml(fake: FakeUpstream) -> str:
    return (
        openai_connection_toml(fake.base_url)
        + f"""
[[models]]
id = "{DEFAULT_MODEL}"
providers = {{ conn_fake = "gpt-fake" }}
price = {{ input = 2.0, output = 8.0 }}
"""
    )


async def through_sluice(
    tmp_path: Path, config: str, fake: FakeUpstream
) -> tuple[int, str, str, list[Recorded]]:
    async with running_gateway(tmp_path / "gw", config) as gw:
        assert gw.dev_key is not None
        code, out, err = await run_claude(gw.base_url, gw.dev_key.key, tmp_path / "home")
    turns = [r for r in fake.requests if r.method == "POST"]
    return code, out, err, turns


async def test_claude_code_default_model_to_anthropic_with_thinking(tmp_path: Path) -> None:
    fake = FakeUpstream()
    fake.responder = anthropic_turn
    await fake.start()
    try:
        code, out, err, turns = await through_sluice(tmp_path, anthropic_toml(fake), fake)
    finally:
        await fake.close()
    assert code == 0, f"claude exited {code}: {out}\n{err}"
    assert "sluice-42" in out  # the shell computed it; it came back through the tool result
    first, second = turns[0].json(), turns[-1].json()
    assert first["model"] == NATIVE_MODEL
    assert first["thinking"]["type"] == "adaptive"
    assert isinstance(first["context_management"]["edits"], list)
    assert isinstance(first["output_config"]["effort"], str)
    assert any(t.get("defer_loading") is True for t in first["tools"])
    roles = [m["role"] for m in first["messages"]]
    assert "system" in roles[1:]  # the system turn stayed where Claude Code put it
    betas = turns[0].headers["anthropic-beta"].split(",")
    assert "context-management-2025-06-27" in betas
    assert tool_output(second) is not None
    assert "sluice-42" in (tool_output(second) or "")


async def test_claude_code_default_model_to_openai_format(tmp_path: Path) -> None:
    fake = FakeUpstream()
    fake.responder = openai_turn
    await fake.start()
    try:
        code, out, err, turns = await through_sluice(tmp_path, openai_toml(fake), fake)
    finally:
        await fake.close()
    assert code == 0, f"claude exited {code}: {out}\n{err}"
    assert "sluice-42" in out
    first = turns[0].json()
    assert first["model"] == "gpt-fake"
    for absent in ("thinking", "context_management", "output_config", "native", "betas"):
        assert absent not in first
    assert all("defer_loading" not in t for t in first["tools"])
    assert [m["role"] for m in first["messages"]].count("system") >= 2
    assert turns[-1].json()["messages"][-1]["role"] == "tool"
