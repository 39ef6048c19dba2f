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
from tests.support.fake_openai import DONE, chunk
from tests.support.fake_upstream import FakeUpstream, Recorded, Reply
from tests.support.gateway import openai_connection_toml, running_gateway

MODEL = "test/gpt-fake"
COMMAND = "echo sluice-$((6*7))"
PROMPT = f"Run the shell command `{COMMAND}` and tell me what it printed."


def codex_config(base_url: str) -> str:
    return f"""
model = "{MODEL}"
model_provider = "sluice"

[model_providers.sluice]
name = "Sluice"
base_url = "{base_url}/v1"
env_key = "SLUICE_API_KEY"
wire_api = "responses"
"""


async def run_codex(base_url: str, key: str, home: Path) -> tuple[int, str, str]:
    codex_home = home / "codex"
    codex_home.mkdir(parents=True, exist_ok=True)
    (codex_home / "config.toml").write_text(codex_config(base_url))
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
