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
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import anthropic
import httpx2
import pytest
from anthropic.types import RedactedThinkingBlock, TextBlock, ThinkingBlock, ToolUseBlock

from sluice.core.batch import ChunkBatch
from sluice.core.tally import Tally
from sluice.core.tokens import tokens_for_chars
from sluice.core.usage import Price, TokenUsage
from sluice.errors import ApiError
from sluice.frontdoors.messages.door import MessagesDoor
from sluice.frontdoors.messages.encode import MessagesStreamEncoder
from sluice.metering.pricing import priced_usage
from sluice.providers.base import StreamTranslator
from sluice.providers.registry import AdapterRegistry
from sluice.wire.chunks import (
    Choice,
    CompletionTokensDetails,
    FunctionDelta,
    PromptTokensDetails,
    Usage,
)
from sluice.wire.encode import StreamIdentity
from tests.providers.test_fixtures import CASES
from tests.support.gateway import counting_ids
from tests.support.transcript import FIXTURES, UPDATE

GOLDEN = FIXTURES / "messages"
DOOR = MessagesDoor()
USER: Any = [{"role": "user", "content": "Say hello"}]
REQUEST = DOOR.decode(
    json.dumps({"model": "m", "max_tokens": 100, "stream": True, "messages": USER}).encode(),
    {},
    64,
)
IDENTITY = StreamIdentity(
    "req_fixture", 1700000000, "test/model", "fixture", "conn", "primary", None
)
OPENING = Tally(Usage(12, 0, 12, PromptTokensDetails(), CompletionTokensDetails()))
PRICE = Price.per_million(1.0, 2.0, 0.5, 1.25)
STOP_REASONS = {"length": "max_tokens", "tool_calls": "tool_use", "content_filter": "refusal"}
IDS = [f"{kind}-{path.stem}" for kind, path in CASES]
FAILING = {"error_midstream", "cut", "malformed_function_call", "prompt_blocked"}
"""The recordings whose stream fails (Gemini's last two before their first chunk: the
gateway would answer them with an HTTP error; here the door's error event is all)."""


def tally(translator: StreamTranslator, *, cut: bool) -> Tally:
    """What the door is told at the end: the translator's usage, priced (an estimate
    when the provider reported none)."""
    streamed = tokens_for_chars(translator.output_chars)
    tokens = translator.usage or TokenUsage(12, streamed, estimated=True)
    return Tally(priced_usage(tokens, PRICE, price_estimate=cut), tokens.cache_write_tokens)


def batches(translator: StreamTranslator, pieces: list[bytes]) -> Iterator[ChunkBatch]:
    for piece in pieces:
        yield translator.feed(piece)
        if translator.failure is not None:
            raise translator.failure
    yield translator.finish()


class Served(NamedTuple):
    body: bytes  # what the client receives
    chosen: list[Choice]  # the first choice's chunks, as the translator produced them
    end: Tally  # what the door was told at the end


def served(kind: str, pieces: list[bytes]) -> Served:
    """The recording fed to its translator in ``pieces``, through the Messages door."""
    translator = AdapterRegistry(counting_ids()).adapter(kind).stream(REQUEST)
    encoder = MessagesStreamEncoder(IDENTITY, lambda: OPENING)
    out: list[bytes] = []
    chosen: list[Choice] = []
    try:
        for batch in batches(translator, pieces):
            if batch:
                out.append(encoder.events(batch))
                chosen += [choice for choices in batch for choice in choices if choice.index == 0]
    except ApiError as err:
        end = tally(translator, cut=True)
        return Served(b"".join([*out, DOOR.error_event(err, end)]), chosen, end)
    end = tally(translator, cut=False)
    return Served(b"".join([*out, encoder.ending(end)]), chosen, end)


def golden(path: Path, received: bytes) -> bytes:
    file = GOLDEN / path.parent.name / f"{path.stem}.sse"
    if UPDATE:
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_bytes(received)
    if not file.exists():
        pytest.fail(f"{file} is missing; run with SLUICE_UPDATE_FIXTURES=1 and review it")
    return file.read_bytes()


def events(body: bytes) -> list[tuple[str, dict[str, Any]]]:
    """The SSE events, each exactly ``event: <name>`` and ``data: <its JSON>``."""
    assert body.endswith(b"\n\n"), "the stream ends mid-event"
    out: list[tuple[str, dict[str, Any]]] = []
    for frame in body[:-2].decode().split("\n\n"):
        name, data = frame.split("\n")
        assert name.startswith("event: ") and data.startswith("data: "), frame
        payload = json.loads(data.removeprefix("data: "))
        assert payload["type"] == name.removeprefix("event: "), frame
        out.append((payload["type"], payload))
    return out


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
    raw = path.read_bytes()
    whole = served(kind, [raw]).body
    assert served(kind, [raw[i : i + 1] for i in range(len(raw))]).body == whole
    rng = random.Random(f"messages-{path.parent.name}-{path.stem}")
    for _ in range(25):
        cuts = sorted(rng.sample(range(1, len(raw)), k=min(len(raw) - 1, rng.randint(1, 12))))
        pieces = [raw[a:b] for a, b in zip([0, *cuts], [*cuts, len(raw)], strict=True)]
        assert served(kind, pieces).body == whole
    assert whole == golden(path, whole)


@pytest.mark.parametrize(("kind", "path"), CASES, ids=IDS)
def test_every_stream_is_well_formed_messages_sse(kind: str, path: Path) -> None:
    body = served(kind, [path.read_bytes()]).body
    assert assert_well_formed(body) == (path.stem not in FAILING)


def sdk(body: bytes) -> anthropic.Anthropic:
    """The SDK, reading ``body`` as the answer to whatever it asks."""

    def reply(request: httpx2.Request) -> httpx2.Response:
        assert request.url.path == "/v1/messages"
        pieces = (body[i : i + 7] for i in range(0, len(body), 7))  # as a socket reads it
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=pieces)

    client = httpx2.Client(transport=httpx2.MockTransport(reply))
    return anthropic.Anthropic(
        api_key="k", base_url="http://sluice.test", max_retries=0, http_client=client
    )


def produced(chosen: list[Choice]) -> dict[str, Any]:
    """What the translator's chunks said: text, reasoning, signatures, redacted
    reasoning and each tool call (id, name, its concatenated arguments parsed)."""
    seen: dict[str, Any] = {"text": "", "thinking": "", "signatures": [], "redacted": []}
    calls: list[list[str]] = []
    by_index: dict[int, list[str]] = {}  # a call's index -> its id, name, arguments
    for delta in (choice.delta for choice in chosen):
        for key, text in (("text", delta.content), ("text", delta.refusal)):
            seen[key] += text if isinstance(text, str) else ""
        seen["thinking"] += r if isinstance(r := delta.reasoning_content, str) else ""
        if isinstance(delta.reasoning_signature, str):
            seen["signatures"].append(delta.reasoning_signature)
        if isinstance(delta.redacted_reasoning, str):
            seen["redacted"].append(delta.redacted_reasoning)
        for call in delta.tool_calls if isinstance(delta.tool_calls, list) else []:
            if isinstance(call.id, str):
                by_index[call.index] = [call.id, "", ""]
                calls.append(by_index[call.index])
            entry, fn = by_index.get(call.index), call.function
            if entry is not None and isinstance(fn, FunctionDelta):
                entry[1] += fn.name if isinstance(fn.name, str) else ""
                entry[2] += fn.arguments if isinstance(fn.arguments, str) else ""
    seen["tools"] = [(id_, name, json.loads(args or "{}")) for id_, name, args in calls]
    return seen


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
    body = golden(path, answer.body)
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
