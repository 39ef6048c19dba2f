"""Every provider's recordings → our ``/v1/messages`` stream, as a client receives it.

Each ``tests/fixtures/<provider>/<case>.raw`` runs through its provider's translator
into one :class:`MessagesStreamEncoder` (the door's error event where the translator
fails). Fed whole, byte by byte and at random splits the bytes must be the same and
equal ``tests/fixtures/messages/<provider>/<case>.sse`` (``SLUICE_UPDATE_FIXTURES=1``
rewrites it); each must be well-formed Anthropic SSE, and the official anthropic SDK,
unchanged, must read it: the final message holds what the translator produced, and a
failed stream raises the SDK's status error with the error body.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NamedTuple

import anthropic
import pytest
from anthropic.types import RedactedThinkingBlock, TextBlock, ThinkingBlock, ToolUseBlock

from sluice.core.tally import Tally
from sluice.frontdoors.messages.door import MessagesDoor
from sluice.frontdoors.messages.encode import MessagesStreamEncoder
from sluice.wire.chunks import Choice, CompletionTokensDetails, PromptTokensDetails, Usage
from tests.frontdoors.recordings import (
    FAILING,
    IDENTITY,
    IDS,
    assert_every_split_gives_the_golden_bytes,
    events,
    golden,
    produced,
    sse_client,
    translated,
)
from tests.providers.test_fixtures import CASES

DOOR = MessagesDoor()
USER: Any = [{"role": "user", "content": "Say hello"}]
REQUEST = DOOR.decode(
    json.dumps({"model": "m", "max_tokens": 100, "stream": True, "messages": USER}).encode(),
    {},
    64,
)
OPENING = Tally(Usage(12, 0, 12, PromptTokensDetails(), CompletionTokensDetails()))
STOP_REASONS = {"length": "max_tokens", "tool_calls": "tool_use", "content_filter": "refusal"}


class Served(NamedTuple):
    body: bytes  # what the client receives
    chosen: list[Choice]  # the first choice's chunks, as the translator produced them
    end: Tally  # what the door was told at the end


def served(kind: str, pieces: list[bytes]) -> Served:
    """The recording fed to its translator in ``pieces``, through the Messages door."""
    run = translated(kind, REQUEST, pieces)
    encoder = MessagesStreamEncoder(IDENTITY, lambda: OPENING)
    out = [encoder.events(batch) for batch in run.batches]
    if run.error is not None:
        out.append(DOOR.error_event(run.error, run.end))
    else:
        out.append(encoder.ending(run.end))
    return Served(b"".join(out), run.chosen, run.end)


def assert_well_formed(body: bytes) -> bool:
    """Anthropic's event order: message_start, blocks 0, 1, … each started, deltas,
    stopped, then message_delta and message_stop, or an ``error`` last and alone.
    True when the stream succeeded."""
    names = [name for name, _ in events(body)]
    if names == ["error"]:
        return False
    assert names[0] == "message_start" and names.count("message_start") == 1
    open_block: int | None = None
    started = -1
    for name, payload in events(body)[1:-1]:
        if name == "content_block_start":
            assert open_block is None and payload["index"] == started + 1
            open_block = started = payload["index"]
        elif name in ("content_block_delta", "content_block_stop"):
            assert payload["index"] == open_block
            open_block = None if name == "content_block_stop" else open_block
        else:
            assert (name, names[-1]) == ("message_delta", "message_stop")
    assert names[-1] in ("message_stop", "error")
    assert open_block is None or names[-1] == "error"
    return names[-1] == "message_stop"


@pytest.mark.parametrize(("kind", "path"), CASES, ids=IDS)
def test_whole_bytewise_and_random_splits_give_the_golden_bytes(kind: str, path: Path) -> None:
    assert_every_split_gives_the_golden_bytes("messages", path, lambda p: served(kind, p).body)


@pytest.mark.parametrize(("kind", "path"), CASES, ids=IDS)
def test_every_stream_is_well_formed_messages_sse(kind: str, path: Path) -> None:
    body = served(kind, [path.read_bytes()]).body
    assert assert_well_formed(body) == (path.stem not in FAILING)


def sdk(body: bytes) -> anthropic.Anthropic:
    """The SDK, reading ``body`` as the answer to whatever it asks."""
    client = sse_client(body, "/v1/messages")
    return anthropic.Anthropic(
        api_key="k", base_url="http://sluice.test", max_retries=0, http_client=client
    )


def stopped(chosen: list[Choice]) -> tuple[str, str | None]:
    """The stop reason and stop sequence the last finish reason means."""
    last = next((c for c in reversed(chosen) if c.finish_reason), None)
    if last is None:
        return "end_turn", None
    matched = last.stop_sequence if isinstance(last.stop_sequence, str) else None
    if matched and last.finish_reason == "stop":
        return "stop_sequence", matched
    return STOP_REASONS.get(last.finish_reason or "", "end_turn"), matched


def received(message: anthropic.types.Message) -> dict[str, Any]:
    """The same, as the SDK's final message holds it."""
    blocks = message.content
    thoughts = [b for b in blocks if isinstance(b, ThinkingBlock)]
    return {
        "text": "".join(b.text for b in blocks if isinstance(b, TextBlock)),
        "thinking": "".join(b.thinking for b in thoughts),
        "signatures": [b.signature for b in thoughts if b.signature],
        "redacted": [b.data for b in blocks if isinstance(b, RedactedThinkingBlock)],
        "tools": [(b.id, b.name, b.input) for b in blocks if isinstance(b, ToolUseBlock)],
    }


@pytest.mark.parametrize(("kind", "path"), CASES, ids=IDS)
def test_the_anthropic_sdk_reads_every_stream(kind: str, path: Path) -> None:
    _, chosen, end = answer = served(kind, [path.read_bytes()])
    body = golden("messages", path, answer.body)
    last = events(body)[-1]
    with sdk(body) as client:
        stream = client.messages.stream(model="m", max_tokens=100, messages=USER)
        if last[0] == "error":
            with pytest.raises(anthropic.APIStatusError) as caught, stream as sse:
                sse.get_final_message()
            error: Any = caught.value.body
            assert error["type"] == "error" and error == last[1]
            return
        with stream as sse:
            message = sse.get_final_message()
    assert received(message) == produced(chosen)
    assert (message.stop_reason, message.stop_sequence) == stopped(chosen)
    assert (message.id, message.model, message.role) == (IDENTITY.id, IDENTITY.model, "assistant")
    cached = end.usage.prompt_tokens_details.cached_tokens
    assert message.usage.cache_read_input_tokens == cached
    assert message.usage.output_tokens == end.usage.completion_tokens
