"""Run a stream translator over recorded bytes and describe everything it produced.

Shared by every provider's fixture tests: the same recording fed whole, byte by byte
and at random split points must give the same transcript.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import msgspec
import pytest

from sluice.errors import ApiError
from sluice.providers.base import StreamTranslator

FIXTURES = Path(__file__).parent.parent / "fixtures"
RECORDED_CHOICES = {"two_choices": 2, "two_candidates": 2}
"""Recordings of a request that asked for more than one choice (``n``); every other
recording's request asked for one. A translator drops the choices not asked for."""
UPDATE = os.environ.get("SLUICE_UPDATE_FIXTURES") == "1"


def _plain(value: Any) -> Any:
    """JSON-shaped builtins (raw JSON fields such as logprobs included)."""
    return json.loads(msgspec.json.encode(value))


def transcript(translator: StreamTranslator, pieces: list[bytes]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    error: ApiError | None = None
    for piece in pieces:
        out += [{"choices": _plain(c)} for c in translator.feed(piece)]
        if translator.failure is not None:
            error = translator.failure
            break
    if error is None:
        try:
            out += [{"choices": _plain(c)} for c in translator.finish()]
        except ApiError as exc:
            error = exc
    end: dict[str, Any] = {
        "end": "complete" if error is None else {"type": error.type, "code": error.code}
    }
    end["usage"] = msgspec.to_builtins(translator.usage) if translator.usage else None
    end["output_chars"] = translator.output_chars
    out.append(end)
    return out


def expected_transcript(path: Path, actual: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The recorded expectation next to a ``.raw`` fixture (rewritten when updating)."""
    golden = path.with_suffix(".chunks.jsonl")
    if UPDATE:
        golden.write_text("".join(json.dumps(line) + "\n" for line in actual))
    if not golden.exists():
        pytest.fail(f"{golden} is missing; run with SLUICE_UPDATE_FIXTURES=1 and review it")
    return [json.loads(line) for line in golden.read_text().splitlines()]
