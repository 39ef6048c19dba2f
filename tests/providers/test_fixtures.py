"""Every provider's recordings → our chunks, fed whole, byte by byte and at random splits.

`tests/fixtures/<format>/<case>.raw` holds the exact upstream bytes and
`<case>.chunks.jsonl` the transcript we expect (reviewed line by line). Any split of
the bytes must give the same transcript.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from sluice.frontdoors.chat import decode_chat_request
from sluice.providers.registry import AdapterRegistry
from sluice.wire.chat import ChatRequest
from tests.support.gateway import counting_ids
from tests.support.transcript import (
    FIXTURES,
    RECORDED_CHOICES,
    expected_transcript,
    transcript,
)

FORMATS = {
    "openai": "openai",
    "anthropic": "anthropic",
    "gemini": "gemini",
    "aws-bedrock": "aws-bedrock",
}  # fixture folder -> a provider kind that reads it
CASES = [
    (kind, path)
    for folder, kind in FORMATS.items()
    for path in sorted((FIXTURES / folder).glob("*.raw"))
]


def request(n: int = 1) -> ChatRequest:
    body = {"model": "m", "stream": True, "n": n, "messages": [{"role": "user", "content": "x"}]}
    return decode_chat_request(json.dumps(body).encode())


REQUIRED = {
    "text",
    "tool_call_fragments",
    "parallel_tool_calls",
    "text_then_tool",
    "length",
    "prompt_cache",
    "error_midstream",
    "cut",
}


def run(kind: str, raw: bytes, pieces: list[bytes], n: int = 1) -> list[dict[str, object]]:
    assert b"".join(pieces) == raw
    translator = AdapterRegistry(counting_ids()).adapter(kind).stream(request(n))
    return transcript(translator, pieces)


@pytest.mark.parametrize(("kind", "path"), CASES, ids=[f"{k}-{p.stem}" for k, p in CASES])
def test_fixture_whole_bytewise_and_random_splits(kind: str, path: Path) -> None:
    raw = path.read_bytes()
    n = RECORDED_CHOICES.get(path.stem, 1)
    whole = run(kind, raw, [raw], n)
    assert whole == expected_transcript(path, whole)
    assert run(kind, raw, [raw[i : i + 1] for i in range(len(raw))], n) == whole
    rng = random.Random(path.stem)
    for _ in range(25):
        cuts = sorted(rng.sample(range(1, len(raw)), k=min(len(raw) - 1, rng.randint(1, 12))))
        pieces = [raw[a:b] for a, b in zip([0, *cuts], [*cuts, len(raw)], strict=True)]
        assert run(kind, raw, pieces, n) == whole


@pytest.mark.parametrize("folder", sorted(FORMATS))
def test_every_required_case_is_recorded(folder: str) -> None:
    stems = {p.stem for p in (FIXTURES / folder).glob("*.raw")}
    assert stems >= REQUIRED
    assert stems & {"thinking", "reasoning", "deepseek_reasoning"}  # reasoning of some kind
    assert stems & {"refusal", "safety", "content_filter"}  # a safety stop


def test_a_whole_answer_is_not_spoilt_by_an_oversized_event_after_it() -> None:
    """[DONE] came first, in the same read: the stream completed; what follows is ignored."""
    raw = (FIXTURES / "openai" / "text.raw").read_bytes()
    tail = b"data: " + b"x" * 1500 + b"\ndata: " + b"y" * 1500 + b"\n\n"
    adapter = AdapterRegistry(counting_ids(), max_event_bytes=2048).adapter("openai")
    whole = transcript(adapter.stream(request()), [raw + tail])
    split = transcript(adapter.stream(request()), [raw, tail])
    assert whole == split and whole[-1]["end"] == "complete"
