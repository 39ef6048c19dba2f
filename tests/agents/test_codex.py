"""Codex CLI (``@openai/codex``, pinned in tests/node), unchanged: ``codex exec`` with a
custom provider whose ``wire_api`` is ``responses`` (the only one Codex takes) and
whose base URL is Sluice. The upstream is OpenAI-format chat completions: it asks for
Codex's shell tool, Codex runs the command, and the command's output (computed by the
shell) comes back through ``/v1/responses`` in the next turn and into the answer."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from tests.agents import cli
from tests.server.test_anthropic_gateway import config as anthropic_toml
from tests.support import fake_anthropic as fa
from tests.support.fake_openai import DONE, chunk
from tests.support.fake_upstream import FakeUpstream, Recorded, Reply, responding
from tests.support.gateway import openai_connection_toml, running_gateway

MODEL = "test/gpt-fake"
COMMAND = "echo sluice-$((6*7))"
PROMPT = f"Run the shell command `{COMMAND}` and tell me what it printed."


def codex_config(base_url: str, model: str = MODEL, extra: str = "") -> str:
    return f"""
model = "{model}"
model_provider = "sluice"{extra}

[model_providers.sluice]
name = "Sluice"
base_url = "{base_url}/v1"
env_key = "SLUICE_API_KEY"
wire_api = "responses"
"""


async def run_codex(
    base_url: str, key: str, home: Path, config: str | None = None
) -> tuple[int, str, str]:
    codex_home = home / "codex"
    codex_home.mkdir(parents=True, exist_ok=True)
    (codex_home / "config.toml").write_text(config or codex_config(base_url))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "CODEX_"))}
    env |= {"HOME": str(home), "CODEX_HOME": str(codex_home), "SLUICE_API_KEY": key}
    args = ["exec", "--skip-git-repo-check", "--ephemeral", "-s", "danger-full-access"]
    return await cli.run("codex", [*args, "--color", "never", PROMPT], home / "work", env)


def shell_call(tools: list[dict[str, Any]]) -> tuple[str, str]:
    """The shell tool Codex offered, and arguments that run the command with it."""
    names = [t["function"]["name"] for t in tools]
    if "exec_command" in names:
        return "exec_command", json.dumps({"cmd": COMMAND})
    if "shell" in names:
        return "shell", json.dumps({"command": ["bash", "-lc", COMMAND]})
    raise AssertionError(f"no shell tool among {names}")


def openai_turn(request: Recorded) -> Reply:
    body = request.json()
    last = body["messages"][-1]
    usage = chunk(usage={"prompt_tokens": 900, "completion_tokens": 20}, choices=False)
    if last["role"] != "tool":
        name, arguments = shell_call(body.get("tools", []))
        call = {"index": 0, "id": "call_1", "type": "function"}
        return Reply.stream(
            chunk(role="assistant", content=""),
            chunk(tool_calls=[{**call, "function": {"name": name, "arguments": arguments}}]),
            chunk(finish="tool_calls"),
            usage,
            DONE,
        )
    content = last["content"]
    text = content if isinstance(content, str) else "".join(p["text"] for p in content)
    found = "sluice-42" if "sluice-42" in text else "nothing"
    return Reply.stream(
        chunk(role="assistant", content=""),
        chunk(content=f"The command printed {found}."),
        chunk(finish="stop"),
        usage,
        DONE,
    )


async def test_codex_exec_runs_a_shell_command_through_the_responses_door(
    tmp_path: Path,
) -> None:
    fake = FakeUpstream()
    fake.responder = openai_turn
    await fake.start()
    try:
        async with running_gateway(tmp_path / "gw", openai_connection_toml(fake.base_url)) as gw:
            assert gw.dev_key is not None
            code, out, err = await run_codex(gw.base_url, gw.dev_key.key, tmp_path / "home")
    finally:
        await fake.close()
    turns = [r.json() for r in fake.requests if r.method == "POST"]
    assert code == 0, f"codex exited {code}: {out}\n{err}\n{turns[-1:]}"
    assert "The command printed sluice-42." in out
    assert len(turns) >= 2
    assert turns[0]["model"] == "gpt-fake"
    assert turns[0]["messages"][0]["role"] in ("system", "developer")
    assert turns[-1]["messages"][-1]["role"] == "tool"


THOUGHT = "I should run the command with the shell tool."
SIGNATURE = "EqQBCkYIBxgCKkB" + "s" * 60 + "=="


def anthropic_turn(request: Recorded) -> Reply:
    """Thinking, signed, then the shell call; the next turn is refused (400, as the real
    API does) unless its assistant turn starts with that signed thinking, unchanged."""
    body = request.json()
    messages = body["messages"]
    turns = [m for m in messages if m["role"] == "assistant"]
    if not turns:
        tools = [{"function": {"name": t["name"]}} for t in body.get("tools", [])]
        name, arguments = shell_call(tools)
        return Reply.stream(
            fa.message_start(900),
            fa.block_start(0, {"type": "thinking", "thinking": "", "signature": ""}),
            fa.block_delta(0, {"type": "thinking_delta", "thinking": THOUGHT}),
            fa.block_delta(0, {"type": "signature_delta", "signature": SIGNATURE}),
            fa.block_stop(0),
            *fa.tool_block(1, "toolu_01", name, arguments),
            *fa.message_end("tool_use", fa.usage(900, 30)),
        )
    turn = turns[0]
    signed = {"type": "thinking", "thinking": THOUGHT, "signature": SIGNATURE}
    if turn["content"][0] != signed:
        error = {"type": "invalid_request_error", "message": "thinking block missing or altered"}
        return Reply.json({"type": "error", "error": error}, status=400)
    result = messages[-1]["content"][-1]
    text = json.dumps(result)
    found = "sluice-42" if "sluice-42" in text else "nothing"
    return Reply.stream(*fa.text_stream(f"The command printed {found}."))


async def test_codex_exec_to_anthropic_keeps_signed_thinking_across_the_turn(
    tmp_path: Path,
) -> None:
    async with responding(anthropic_turn) as claude:
        async with running_gateway(tmp_path / "gw", anthropic_toml(claude)) as gw:
            assert gw.dev_key is not None
            extra = '\nmodel_reasoning_effort = "low"'
            config = codex_config(gw.base_url, "test/claude", extra)
            code, out, err = await run_codex(gw.base_url, gw.dev_key.key, tmp_path / "home", config)
    turns = [r.json() for r in claude.requests if r.method == "POST"]
    assert code == 0, f"codex exited {code}: {out}\n{err}\n{turns[-1:]}"
    assert "The command printed sluice-42." in out
    assert turns[0]["thinking"]["type"] == "enabled"
    assert len(turns) >= 2
    answered = [m for m in turns[-1]["messages"] if m["role"] == "assistant"]
    assert answered[0]["content"][0]["signature"] == SIGNATURE
