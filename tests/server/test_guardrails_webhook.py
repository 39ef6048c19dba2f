"""The webhook guardrail against a real local checker (aiohttp on 127.0.0.1)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from openai import APIError, APIStatusError, BadRequestError

from sluice import __version__
from sluice.guardrails.webhook import MAX_ANSWER_BYTES
from tests.server.test_guardrails import USER, rail, record, sdk, streamed
from tests.support.fake_openai import text_stream
from tests.support.fake_upstream import FakeUpstream, Pause, Reply, Step
from tests.support.gateway import openai_connection_toml, running_gateway


class Checker:
    """Allows unless a text holds ``forbidden``; ``mode`` "slow" never answers in time,
    "broken" answers HTTP 500, "huge" pads its answer past the gateway's bound. Records
    each call's User-Agent and client port."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.agents: list[str] = []
        self.ports: list[int] = []
        self.mode = "normal"
        self.release = asyncio.Event()
        self.url = ""

    async def check(self, request: web.Request) -> web.Response:
        doc = await request.json()
        self.calls.append(doc)
        self.agents.append(request.headers.get("user-agent", ""))
        peer = request.transport.get_extra_info("peername") if request.transport else None
        self.ports.append(peer[1] if peer else 0)
        if self.mode == "slow":
            await self.release.wait()
        if self.mode == "broken":
            return web.Response(status=500, text="boom")
        if self.mode == "huge":
            return web.json_response({"allowed": True, "pad": "x" * MAX_ANSWER_BYTES})
        return web.json_response({"allowed": not any("forbidden" in t for t in doc["texts"])})


@pytest.fixture
async def checker() -> AsyncIterator[Checker]:
    found = Checker()
    app = web.Application()
    app.router.add_post("/check", found.check)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    host, port = runner.addresses[0][:2]
    found.url = f"http://{host}:{port}/check"
    try:
        yield found
    finally:
        found.release.set()
        await runner.cleanup()


def hook(checker: Checker, stage: str, **extra: str) -> str:
    return rail("checker", stage=stage, kind='"webhook"', url=f'"{checker.url}"', **extra)


async def test_input_allowed(tmp_path: Path, fake: FakeUpstream, checker: Checker) -> None:
    config = openai_connection_toml(fake.base_url) + hook(checker, "input")
    async with running_gateway(tmp_path, config) as gw, sdk(gw) as client:
        text, request_id = await streamed(client)
        row = await record(gw, request_id)
    assert text == "Hello world"
    assert checker.calls == [
        {
            "guardrail": "checker",
            "stage": "input",
            "request_id": request_id,
            "texts": ["What is the key?"],
            "final": True,
        }
    ]
    assert row["guardrails"] == []


async def test_input_blocked(tmp_path: Path, fake: FakeUpstream, checker: Checker) -> None:
    config = openai_connection_toml(fake.base_url) + hook(checker, "input")
    async with running_gateway(tmp_path, config) as gw, sdk(gw) as client:
        with pytest.raises(BadRequestError) as info:
            await client.chat.completions.create(
                model="test/gpt-fake",
                messages=[{"role": "user", "content": "say the forbidden thing"}],
            )
    body: Any = info.value.body
    assert (body["code"], body["message"]) == (
        "guardrail_blocked",
        "The request was blocked by guardrail 'checker'.",
    )
    assert fake.requests == []


async def test_a_timeout_fails_closed(tmp_path: Path, fake: FakeUpstream, checker: Checker) -> None:
    checker.mode = "slow"
    config = openai_connection_toml(fake.base_url) + hook(checker, "input", timeout="0.2")
    async with running_gateway(tmp_path, config) as gw, sdk(gw) as client:
        with pytest.raises(APIStatusError) as info:
            await client.chat.completions.create(model="test/gpt-fake", messages=USER)
        row = await record(gw, info.value.response.headers["x-request-id"])
    body: Any = info.value.body
    assert info.value.status_code == 503
    assert (body["type"], body["code"]) == ("guardrail_error", "guardrail_unavailable")
    assert "did not answer in time" in body["message"] and checker.url not in body["message"]
    assert fake.requests == []
    assert row["status"] == "error"
    assert row["guardrails"] == [
        {"name": "checker", "stage": "input", "action": "block", "outcome": "unavailable"}
    ]


async def test_a_timeout_fails_open_when_configured(
    tmp_path: Path, fake: FakeUpstream, checker: Checker
) -> None:
    checker.mode = "slow"
    extra = {"timeout": "0.2", "fail_open": "true"}
    config = openai_connection_toml(fake.base_url) + hook(checker, "input", **extra)
    async with running_gateway(tmp_path, config) as gw, sdk(gw) as client:
        text, request_id = await streamed(client)
        row = await record(gw, request_id)
    assert text == "Hello world"
    assert row["status"] == "complete"
    assert row["guardrails"] == [
        {"name": "checker", "stage": "input", "action": "block", "outcome": "failed_open"}
    ]


PIECES = ("First part, ", "second part, ", "third part, ", "the end.")


def paced(*pieces: str) -> Reply:
    """A stream whose chunks arrive one upstream read each."""
    steps: list[Step] = []
    for step in text_stream(*pieces):
        steps += [step, Pause(0.02)]
    return Reply.stream(*steps)


async def test_output_is_checked_in_batches(
    tmp_path: Path, fake: FakeUpstream, checker: Checker
) -> None:
    fake.queue(paced(*PIECES))
    config = openai_connection_toml(fake.base_url) + hook(checker, "output", batch_chars="21")
    async with running_gateway(tmp_path, config) as gw, sdk(gw) as client:
        text, _ = await streamed(client)
    assert text == "".join(PIECES)
    assert [c["stage"] for c in checker.calls] == ["output"] * 2
    assert [c["texts"] for c in checker.calls] == [
        ["First part, second part, "],
        ["third part, the end."],
    ]
    assert [c["final"] for c in checker.calls] == [False, True]


async def test_output_blocked_mid_stream(
    tmp_path: Path, fake: FakeUpstream, checker: Checker
) -> None:
    fake.queue(paced("Fine text here. ", "Also fine. ", "forbidden!", "x"))
    config = openai_connection_toml(fake.base_url) + hook(checker, "output", batch_chars="16")
    seen: list[str] = []
    async with running_gateway(tmp_path, config) as gw, sdk(gw) as client:
        stream = await client.chat.completions.create(
            model="test/gpt-fake", messages=USER, stream=True
        )
        with pytest.raises(APIError) as info:
            async for c in stream:
                seen.append(c.choices[0].delta.content or "" if c.choices else "")
    body: Any = info.value.body
    assert body["code"] == "guardrail_blocked"
    assert "".join(seen) == "Fine text here. "  # the batch that passed stays delivered


async def test_a_broken_output_checker_ends_the_stream(
    tmp_path: Path, fake: FakeUpstream, checker: Checker
) -> None:
    checker.mode = "broken"
    config = openai_connection_toml(fake.base_url) + hook(checker, "output")
    async with running_gateway(tmp_path, config) as gw, sdk(gw) as client:
        stream = await client.chat.completions.create(
            model="test/gpt-fake", messages=USER, stream=True
        )
        with pytest.raises(APIError) as info:
            async for _ in stream:
                pass
    body: Any = info.value.body
    assert body["code"] == "guardrail_unavailable"
    assert "HTTP 500" in body["message"]


async def test_calls_go_through_the_gateways_http_client(
    tmp_path: Path, fake: FakeUpstream, checker: Checker
) -> None:
    """The one transport: its User-Agent, and its pool (three asks, one connection)."""
    config = openai_connection_toml(fake.base_url) + hook(checker, "input")
    async with running_gateway(tmp_path, config) as gw, sdk(gw) as client:
        for _ in range(3):
            await streamed(client)
    assert checker.agents == [f"sluice/{__version__}"] * 3
    assert len(checker.ports) == 3 and len(set(checker.ports)) == 1


async def test_an_oversized_answer_is_not_read(
    tmp_path: Path, fake: FakeUpstream, checker: Checker
) -> None:
    checker.mode = "huge"
    config = openai_connection_toml(fake.base_url) + hook(checker, "input")
    async with running_gateway(tmp_path, config) as gw, sdk(gw) as client:
        with pytest.raises(APIStatusError) as info:
            await client.chat.completions.create(model="test/gpt-fake", messages=USER)
    body: Any = info.value.body
    assert info.value.status_code == 503
    assert body["code"] == "guardrail_unavailable"
    assert "answer was too large" in body["message"]
    assert fake.requests == []
