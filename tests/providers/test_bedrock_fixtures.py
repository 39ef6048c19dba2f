"""ConverseStream recordings → our chunks, fed whole, byte by byte and at random splits."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from sluice.providers.bedrock.stream import BedrockStreamTranslator
from tests.support.gateway import counting_ids
from tests.support.transcript import FIXTURES, expected_transcript, transcript

CASES = sorted((FIXTURES / "aws-bedrock").glob("*.raw"))


def run(raw: bytes, pieces: list[bytes]) -> list[dict[str, object]]:
    assert b"".join(pieces) == raw
    return transcript(BedrockStreamTranslator(counting_ids()), pieces)


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_fixture_whole_bytewise_and_random_splits(path: Path) -> None:
    raw = path.read_bytes()
    whole = run(raw, [raw])
    assert whole == expected_transcript(path, whole)
    assert run(raw, [raw[i : i + 1] for i in range(len(raw))]) == whole
    rng = random.Random(path.stem)
    for _ in range(25):
        cuts = sorted(rng.sample(range(1, len(raw)), k=min(len(raw) - 1, rng.randint(1, 12))))
        pieces = [raw[a:b] for a, b in zip([0, *cuts], [*cuts, len(raw)], strict=True)]
        assert run(raw, pieces) == whole


def test_every_required_case_is_recorded() -> None:
    assert {p.stem for p in CASES} == {
        "text",
        "tool_call_fragments",
        "parallel_tool_calls",
        "text_then_tool",
        "reasoning",
        "length",
        "prompt_cache",
        "content_filter",
        "error_midstream",
        "cut",
    }
