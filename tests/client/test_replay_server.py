"""``sluice replay serve``: recorded streams with faults on the wire, read by this
toolkit and by the official openai SDK, unchanged; each reaches the state its fault
implies."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import openai
import pytest
from aiohttp import web
from click.testing import CliRunner
from openai.types.chat import ChatCompletionMessageParam

from sluice.cli.main import main
from sluice.client import AsyncChatClient, RetryPolicy, Timeouts
from sluice.client.replay_server import Recording, ReplayServer

CORPUS = Path(__file__).parent.parent / "fixtures" / "sse"
TEXT = "Server-sent events are simple."
USER: list[ChatCompletionMessageParam] = [{"role": "user", "content": "hi"}]


@pytest.fixture
async def server() -> AsyncIterator[str]:
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


@pytest.mark.parametrize(
    ("fault", "state", "code"),
    [
        ("", "complete", None),
        ("split", "complete", None),
        ("comment", "complete", None),
        ("crlf", "complete", None),
        ("trickle", "complete", None),
        ("no-done", "incomplete", "stream_ended"),
        ("length", "truncated", None),
        ("error", "error", "replay_fault"),
        ("stall", "error", "idle_timeout"),
        ("reset", "incomplete", None),
    ],
)
async def test_the_toolkit_reaches_the_state_of_each_fault(
    server: str, fault: str, state: str, code: str | None
) -> None:
    headers = (("X-Replay-File", "text.sse"), ("X-Replay-Fault", fault))
    timeouts = Timeouts(first_event=5, idle=0.5)
    async with AsyncChatClient(
        server, "k", timeouts=timeouts, retry=RetryPolicy(max_attempts=1), headers=headers
    ) as client:
        result = await client.stream("m", USER).collect()
    assert result.state == state
    if code is not None:
        assert result.error is not None and result.error.code == code
    if state in ("complete", "truncated"):
        assert result.text == TEXT


@pytest.mark.parametrize("resumes", [3, 0])
async def test_cut_and_resume_lets_a_client_test_its_resume(server: str, resumes: int) -> None:
    """The fault cuts a resumable stream; a client that resumes finishes the answer, one
    that may not is left incomplete (issue 25)."""
    headers = (("X-Replay-File", "text.sse"), ("X-Replay-Fault", "cut-and-resume"))
    retry = RetryPolicy(max_attempts=1, max_resumes=resumes)
    async with AsyncChatClient(server, "k", retry=retry, headers=headers) as client:
        result = await client.stream("m", USER, resumable=True).collect()
    if resumes:
        assert (result.state, result.resumes, result.text) == ("complete", 1, TEXT)
    else:
        assert (result.state, result.resumes) == ("incomplete", 0)


def openai_client(server: str, fault: str) -> openai.AsyncOpenAI:
    headers = {"X-Replay-File": "text.sse", "X-Replay-Fault": fault}
    return openai.AsyncOpenAI(
        base_url=server, api_key="k", max_retries=0, timeout=2.0, default_headers=headers
    )


async def read(client: openai.AsyncOpenAI) -> tuple[str, str | None]:
    text, finish = "", None
    async with client:
        stream = await client.chat.completions.create(model="m", messages=USER, stream=True)
        async for chunk in stream:
            if chunk.choices:
                text += chunk.choices[0].delta.content or ""
                finish = chunk.choices[0].finish_reason or finish
    return text, finish


@pytest.mark.parametrize("fault", ["split", "comment", "crlf", "no-done"])
async def test_the_openai_sdk_reads_the_answer_whole(server: str, fault: str) -> None:
    """After a split it reads the whole answer; without [DONE] it stops without a word,
    which is what this toolkit's ``incomplete`` is for."""
    assert await read(openai_client(server, fault)) == (TEXT, "stop")


async def test_the_openai_sdk_sees_length_and_fails_on_the_rest(server: str) -> None:
    assert await read(openai_client(server, "length")) == (TEXT, "length")
    with pytest.raises(openai.APIError):
        await read(openai_client(server, "error"))
    with pytest.raises((openai.APITimeoutError, openai.APIConnectionError)):
        await read(openai_client(server, "stall"))
    with pytest.raises((openai.APIConnectionError, openai.APIError)):
        await read(openai_client(server, "reset"))


async def test_files_take_turns_and_unknown_names_are_refused(server: str) -> None:
    async with AsyncChatClient(server, "k", retry=RetryPolicy(max_attempts=1)) as client:
        answers = [await client.stream("m", USER).collect() for _ in range(5)]
    assert len({a.text or str(a.tool_calls) for a in answers}) == 5  # five recordings
    async with AsyncChatClient(server, "k", headers=[("X-Replay-Fault", "hiccup")]) as client:
        refused = await client.stream("m", USER).collect()
    assert refused.state == "error" and refused.error is not None and refused.error.status == 400


def test_the_command_refuses_an_unknown_default_fault(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["replay", "serve", str(CORPUS / "text.sse"), "--fault", "x"])
    assert result.exit_code == 2 and "stall" in result.output
