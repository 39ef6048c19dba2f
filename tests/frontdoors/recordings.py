"""Every provider's recordings, translated, for the front doors' golden-stream tests.

Each ``tests/fixtures/<provider>/<case>.raw`` runs through its provider's translator
(:func:`translated`); a door's test encodes the batches with its stream encoder and
compares the bytes with ``tests/fixtures/<door>/<provider>/<case>.sse``
(``SLUICE_UPDATE_FIXTURES=1`` rewrites it), then lets the door's official SDK read them
through :func:`sse_client`. :func:`produced` is what the translator said, for comparing
with what the SDK folded.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import httpx2
import msgspec
import pytest

from sluice.core.batch import ChunkBatch
from sluice.core.tally import Tally
from sluice.core.tokens import tokens_for_chars
from sluice.core.usage import Price, TokenUsage
from sluice.errors import ApiError
from sluice.metering.pricing import priced_usage
from sluice.providers.base import StreamTranslator
from sluice.providers.registry import AdapterRegistry
from sluice.wire.chat import ChatRequest
from sluice.wire.chunks import Choice, FunctionDelta
from sluice.wire.encode import StreamIdentity
from tests.providers.test_fixtures import CASES
from tests.support.gateway import counting_ids
from tests.support.transcript import FIXTURES, UPDATE

IDENTITY = StreamIdentity(
    "req_fixture", 1700000000, "test/model", "fixture", "conn", "primary", None
)
PRICE = Price.per_million(1.0, 2.0, 0.5, 1.25)
IDS = [f"{kind}-{path.stem}" for kind, path in CASES]
FAILING = {"error_midstream", "cut", "malformed_function_call", "prompt_blocked"}
"""The recordings whose stream fails (Gemini's last two before their first chunk: the
gateway would answer them with an HTTP error; here the door's error event is all)."""


class Translated(NamedTuple):
    batches: list[ChunkBatch]  # every non-empty batch the translator gave, in order
    error: ApiError | None  # its failure (a cut stream's too), if it failed
    end: Tally  # what the door is told at the end

    @property
    def chosen(self) -> list[Choice]:
        """The first choice's chunks, as the translator produced them."""
        return [c for batch in self.batches for choices in batch for c in choices if c.index == 0]

    @property
    def shown(self) -> bool:
        """A chunk the client must see (anything beyond the role chunk) came: the gateway
        fails over until one does, so a failure before it is the door's error alone."""
        return any(
            c.finish_reason is not None or c.delta.role is msgspec.UNSET for c in self.chosen
        )


def tally(translator: StreamTranslator, *, cut: bool) -> Tally:
    """The translator's usage, priced (an estimate when the provider reported none)."""
    streamed = tokens_for_chars(translator.output_chars)
    tokens = translator.usage or TokenUsage(12, streamed, estimated=True)
    return Tally(priced_usage(tokens, PRICE, price_estimate=cut), tokens.cache_write_tokens)


def translated(kind: str, req: ChatRequest, pieces: list[bytes]) -> Translated:
    """The recording fed to a new translator of ``kind`` in ``pieces``."""
    translator = AdapterRegistry(counting_ids()).adapter(kind).stream(req)
    batches: list[ChunkBatch] = []
    try:
        for piece in pieces:
            batches.append(translator.feed(piece))
            if translator.failure is not None:
                raise translator.failure
        batches.append(translator.finish())
    except ApiError as err:
        return Translated([b for b in batches if b], err, tally(translator, cut=True))
    return Translated([b for b in batches if b], None, tally(translator, cut=False))


def splits(path: Path, door: str) -> Iterator[list[bytes]]:
    """The recording whole, byte by byte, then at 25 random (seeded) sets of cuts."""
    raw = path.read_bytes()
    yield [raw]
    yield [raw[i : i + 1] for i in range(len(raw))]
    rng = random.Random(f"{door}-{path.parent.name}-{path.stem}")
    for _ in range(25):
        cuts = sorted(rng.sample(range(1, len(raw)), k=min(len(raw) - 1, rng.randint(1, 12))))
        yield [raw[a:b] for a, b in zip([0, *cuts], [*cuts, len(raw)], strict=True)]


def assert_every_split_gives_the_golden_bytes(
    door: str, path: Path, served: Callable[[list[bytes]], bytes]
) -> None:
    """What the door ``served`` from the recording fed whole, byte by byte and at random
    splits: the same bytes every time, and the golden ones."""
    pieces = splits(path, door)
    whole = served(next(pieces))
    for split in pieces:
        assert served(split) == whole
    assert whole == golden(door, path, whole)


def golden(door: str, path: Path, received: bytes) -> bytes:
    file = FIXTURES / door / path.parent.name / f"{path.stem}.sse"
    if UPDATE:
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_bytes(received)
    if not file.exists():
        pytest.fail(f"{file} is missing; run with SLUICE_UPDATE_FIXTURES=1 and review it")
    return file.read_bytes()


def events(body: bytes) -> list[tuple[str, dict[str, Any]]]:
    """The SSE events, each exactly ``event: <name>`` and ``data: <its JSON>`` whose
    ``type`` is the name."""
    assert body.endswith(b"\n\n"), "the stream ends mid-event"
    out: list[tuple[str, dict[str, Any]]] = []
    for frame in body[:-2].decode().split("\n\n"):
        name, data = frame.split("\n")
        assert name.startswith("event: ") and data.startswith("data: "), frame
        payload = json.loads(data.removeprefix("data: "))
        assert payload["type"] == name.removeprefix("event: "), frame
        out.append((payload["type"], payload))
    return out


def sse_client(body: bytes, path: str) -> httpx2.Client:
    """An HTTP client answering ``path`` with ``body`` as an SSE stream, 7 bytes a read
    (as a socket reads it)."""

    def reply(request: httpx2.Request) -> httpx2.Response:
        assert request.url.path == path
        pieces = (body[i : i + 7] for i in range(0, len(body), 7))
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=pieces)

    return httpx2.Client(transport=httpx2.MockTransport(reply))


def produced(chosen: list[Choice]) -> dict[str, Any]:
    """What the translator's chunks said: text (a refusal's too), reasoning, signatures,
    redacted reasoning and each tool call (id, name, its concatenated arguments parsed)."""
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
