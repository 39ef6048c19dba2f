"""The JavaScript toolkit (``sluice/web/toolkit.js``) on Node's test runner
(``tests/node/toolkit.test.mjs``), against a real gateway serving the demo and the
replay server with its faults on the wire, both started here. Node absent (or older
than 20): skipped, except under ``CI=true``, where it fails (``make test`` installs it:
scripts/deps.sh)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web

from sluice.client.replay_server import Recording, ReplayServer
from tests.support.accounts import metered_key
from tests.support.cutting_proxy import CuttingProxy
from tests.support.fake_openai import text_stream
from tests.support.fake_upstream import FakeUpstream, Pause, Reply, Step
from tests.support.gateway import running_gateway

ROOT = Path(__file__).parents[2]
TESTS = ROOT / "tests" / "node" / "toolkit.test.mjs"
CORPUS = ROOT / "tests" / "fixtures" / "sse"
DEMO = """
[[connections]]
id = "conn_demo"
provider = "demo"
options = { first_token_ms = 20, token_ms = 2 }
"""
MIN_TESTS = 30  # what the file holds today, give or take: a lost suite must not pass


def node_binary() -> str:
    """Node 20 or later, else a skip (a failure under ``CI=true``)."""
    found, problem = shutil.which("node"), None
    if found is None:
        problem = "node is not installed"
    else:
        version = subprocess.run(
            [found, "--version"], check=False, capture_output=True, text=True
        ).stdout
        major = re.match(r"v(\d+)\.", version)
        if major is None or int(major[1]) < 20:
            problem = f"node {version.strip() or '?'} is older than 20"
    if found is None or problem is not None:
        message = f"{problem} (make test installs it: scripts/deps.sh)"
        if os.environ.get("CI") == "true":
            pytest.fail(message + " — CI=true requires it")
        pytest.skip(message)
    return found


@pytest.fixture
async def replay_url() -> AsyncIterator[str]:
    recordings = [Recording(p.name, p.read_bytes()) for p in sorted(CORPUS.glob("*.sse"))]
    app = ReplayServer(recordings, rate=50.0, seed=7).app()
    runner = web.AppRunner(app, handler_cancellation=True)  # a stall ends when its client does
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        await runner.cleanup()


async def test_the_js_toolkit_passes_its_node_tests(replay_url: str, tmp_path: Path) -> None:
    node = node_binary()
    async with running_gateway(tmp_path, DEMO) as gw:
        assert gw.dev_key is not None
        env = {**os.environ, "SLUICE_BASE_URL": gw.base_url, "SLUICE_KEY": gw.dev_key.key}
        env |= {"SLUICE_REPLAY_URL": replay_url}
        pipe = asyncio.subprocess.PIPE
        process = await asyncio.create_subprocess_exec(
            *(node, "--test", "--test-reporter=tap", str(TESTS)),
            cwd=ROOT,
            env=env,
            stdout=pipe,
            stderr=pipe,
        )
        try:
            out, err = await asyncio.wait_for(process.communicate(), 45)
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
    report = out.decode(errors="replace") + err.decode(errors="replace")
    counts = {k: int(v) for k, v in re.findall(r"^# (\w+) (\d+)$", report, re.MULTILINE)}
    assert process.returncode == 0, report
    assert counts.get("fail") == 0 and counts.get("cancelled") == 0, report
    assert counts.get("skipped") == 0 and counts.get("todo") == 0, report
    assert counts.get("pass", 0) >= MIN_TESTS, report


def test_missing_node_skips_but_fails_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda *_, **__: None)
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="node is not installed"):
        node_binary()
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true requires it"):
        node_binary()


RESUME_SCRIPT = """
import { streamChat } from "%s";
const [base, key] = process.argv.slice(1);
const result = await streamChat({ baseUrl: base, apiKey: key, model: "test/m",
  messages: [{ role: "user", content: "hi" }], resumable: true });
console.log(JSON.stringify(result));
"""


async def test_the_js_toolkit_resumes_a_cut_stream(tmp_path: Path) -> None:
    """Cut by a proxy mid-answer, ``streamChat({resumable: true})`` reconnects with
    ``Last-Event-ID`` and finishes the same answer, the upstream asked once (issue 25)."""
    node = node_binary()
    fake = FakeUpstream()
    await fake.start()
    steps: list[Step] = []
    for step in text_stream(*(f"part{i} " for i in range(20)), usage=USAGE):
        steps += [step, Pause(0.02)]
    fake.default = Reply.stream(*steps)
    try:
        async with running_gateway(tmp_path, resumable_config(fake)) as gw:
            key = await metered_key(gw.gateway.store, "team", 10**9)
            proxy = CuttingProxy(gw.host, gw.port, 2500)
            await proxy.start()
            try:
                script = RESUME_SCRIPT % (ROOT / "sluice" / "web" / "toolkit.js").as_uri()
                process = await asyncio.create_subprocess_exec(
                    node, "--input-type=module", "-e", script, proxy.base_url, key,
                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                )  # fmt: skip
                out, err = await asyncio.wait_for(process.communicate(), 30)
            finally:
                await proxy.close()
    finally:
        await fake.close()
    assert process.returncode == 0, err.decode()
    result = json.loads(out)
    assert proxy.cuts == 1 and proxy.connections == 2
    assert (result["state"], result["resumes"]) == ("complete", 1)
    assert result["text"] == "".join(f"part{i} " for i in range(20))
    assert len(fake.requests) == 1 and result["requestId"].startswith("req_")


USAGE = {"prompt_tokens": 5, "completion_tokens": 20, "total_tokens": 25}


def resumable_config(fake: FakeUpstream) -> str:
    return (
        f'[[connections]]\nid = "conn_fake"\nprovider = "openai-compatible"\n'
        f'base_url = "{fake.base_url}"\n'
        '[[models]]\nid = "test/m"\nproviders = { conn_fake = "m" }\n'
        "price = { input = 1.0, output = 2.0 }\n"
    )
