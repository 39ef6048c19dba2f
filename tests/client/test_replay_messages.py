"""``sluice replay serve`` with a Messages recording: the faults in Messages terms, read
by the official anthropic SDK, unchanged; ``sluice replay FILE`` says it reads chat
streams only instead of calling a Messages recording incomplete."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import anthropic
import pytest
from aiohttp import web
from click.testing import CliRunner

from sluice.cli.main import main
from sluice.client.replay import Fault, inject, is_messages
from sluice.client.replay_server import Recording, ReplayServer
from sluice.wire.sse import SSEDecoder

RECORDING = Path(__file__).parent.parent / "fixtures" / "messages" / "openai" / "text.sse"
CHAT = Path(__file__).parent.parent / "fixtures" / "sse" / "text.sse"
TEXT = "Server-sent events are simple."


@pytest.fixture
async def server() -> AsyncIterator[str]:
    app = ReplayServer([Recording("m.sse", RECORDING.read_bytes())], rate=50.0, seed=7).app()
    runner = web.AppRunner(app, handler_cancellation=True)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


async def read(server: str, fault: str) -> tuple[str, str | None, list[str]]:
    """The text, the stop reason and the event types the SDK saw."""
    client = anthropic.AsyncAnthropic(
        base_url=server,
        api_key="k",
        max_retries=0,
        timeout=2.0,
        default_headers={"X-Replay-Fault": fault},
    )
    text, seen = "", list[str]()
    stop_reason: str | None = None
    async with client:
        stream = await client.messages.create(
            model="m", max_tokens=16, messages=[{"role": "user", "content": "hi"}], stream=True
        )
        async for event in stream:
            seen.append(event.type)
            if event.type == "content_block_delta" and event.delta.type == "text_delta":
                text += event.delta.text
            elif event.type == "message_delta":
                stop_reason = event.delta.stop_reason
    return text, stop_reason, seen


@pytest.mark.parametrize("fault", ["", "split", "comment", "crlf", "trickle"])
async def test_the_sdk_reads_the_whole_answer(server: str, fault: str) -> None:
    text, stop, seen = await read(server, fault)
    assert (text, stop, seen[0], seen[-1]) == (TEXT, "end_turn", "message_start", "message_stop")


async def test_length_stops_at_max_tokens_and_no_done_drops_message_stop(server: str) -> None:
    text, stop, seen = await read(server, "length")
    assert (text, stop, seen[-1]) == (TEXT, "max_tokens", "message_stop")
    text, stop, seen = await read(server, "no-done")
    assert (text, stop) == (TEXT, "end_turn") and "message_stop" not in seen


async def test_an_error_event_replaces_the_end_and_the_sdk_raises(server: str) -> None:
    with pytest.raises(anthropic.APIStatusError) as raised:
        await read(server, "error")
    assert "fault injected by the replay harness" in str(raised.value)


def test_every_event_keeps_its_name_under_every_fault() -> None:
    data = RECORDING.read_bytes()
    faults: tuple[Fault, ...] = ("comment", "crlf", "length", "no-done", "error")
    for fault in faults:
        events = SSEDecoder().feed(b"".join(inject(data, fault)[0]))
        assert events and all(e.event is not None for e in events), fault
    assert is_messages(data) and not is_messages(CHAT.read_bytes())


def test_replay_check_says_it_reads_chat_streams_only() -> None:
    result = CliRunner().invoke(main, ["replay", str(RECORDING)])
    assert result.exit_code == 2
    assert "Messages recording" in result.output and "replay serve" in result.output
