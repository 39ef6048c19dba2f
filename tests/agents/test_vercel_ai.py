"""The Vercel AI SDK (``ai`` with ``@ai-sdk/openai``'s ``openai.responses()``, pinned in
tests/node), unchanged, against ``/v1/responses`` (``tests/node/vercel_responses.mjs``):
streamed text, then a tool the SDK runs itself and whose result goes back for the final
answer."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.agents import cli
from tests.agents.test_openai_agents import MODEL, config, weather_turn
from tests.support.fake_openai import DONE, chunk
from tests.support.fake_upstream import Recorded, Reply, responding
from tests.support.gateway import running_gateway

SCRIPT = cli.BIN.parent.parent / "vercel_responses.mjs"


def node() -> str:
    found = shutil.which("node")
    if found is None or not (cli.BIN.parent / "@ai-sdk" / "openai").exists():
        message = "node or the Vercel AI SDK is missing (make test installs them)"
        if os.environ.get("CI") == "true":
            pytest.fail(message + " — CI=true requires it")
        pytest.skip(message)
    return found


def turn(request: Recorded) -> Reply:
    """'Say hello' gets text; the weather question goes to the weather turns."""
    body = request.json()
    if "Weather" in json.dumps(body["messages"]):
        return weather_turn(request)
    return Reply.stream(
        chunk(role="assistant", content=""),
        *(chunk(content=piece) for piece in ("Hello", " there")),
        chunk(finish="stop"),
        chunk(usage={"prompt_tokens": 9, "completion_tokens": 2}, choices=False),
        DONE,
    )


async def test_vercel_ai_streams_text_and_runs_a_tool(tmp_path: Path) -> None:
    binary = node()
    async with responding(turn) as fake, running_gateway(tmp_path, config(fake)) as gw:
        assert gw.dev_key is not None
        env = {**os.environ, "SLUICE_BASE_URL": gw.base_url + "/v1"}
        env |= {"SLUICE_KEY": gw.dev_key.key, "SLUICE_MODEL": MODEL}
        code, out, err = await cli.run_program(binary, [str(SCRIPT)], tmp_path, env)
    assert code == 0, err
    seen = json.loads(out.strip().splitlines()[-1])
    assert seen["text"] == "Hello there"
    assert seen["calls"] == [{"name": "get_weather", "input": {"city": "Oslo"}}]
    assert seen["answer"] == "The tool said: sunny, 21C in Oslo"
    assert seen["usage"]["inputTokens"] == 9
