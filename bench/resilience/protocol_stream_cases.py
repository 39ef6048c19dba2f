"""The hand-vector cases of the "malformed SSE and event streams" rows, and checking one:
every split of it fed to its translator, the runs compared."""

from __future__ import annotations

import random
from dataclasses import dataclass

from bench.resilience.protocol_streams import (
    BEDROCK,
    SMALL,
    SSE_KINDS,
    embedded,
    fixture,
    run,
    splits,
)
from bench.resilience.protocol_vectors_eventstream import eventstream_vectors, frame
from bench.resilience.protocol_vectors_sse import sse_vectors


def sse_cases(rng: random.Random) -> list[tuple[str, str, bytes, int]]:
    """(kind, vector name, stream, bound): every SSE vector for every SSE translator,
    alone and inside that provider's valid stream; every event-stream vector for the
    Bedrock translator, alone and inside its valid stream."""
    cases = []
    for v in sse_vectors(rng):
        for kind in SSE_KINDS:
            cases.append((kind, v.name, v.data, v.bound))
            cases.append((kind, f"{v.name} (in a valid stream)", embedded(kind, v.data), v.bound))
    after = b"data: " + b"x" * 600 + b"\ndata: " + b"y" * 600 + b"\n\n"
    for kind in SSE_KINDS:  # an oversized event in the same read as the stream's end
        cases.append(
            (kind, "an oversized event right after a complete stream", fixture(kind) + after, SMALL)
        )
    cases.append(
        (
            BEDROCK,
            "an oversized frame right after a complete stream",
            fixture(BEDROCK) + frame(b"", b"x" * 2 * SMALL),
            SMALL,
        )
    )
    for v in eventstream_vectors(rng):
        cases.append((BEDROCK, v.name, v.data, v.bound))
        cases.append((BEDROCK, f"{v.name} (in a valid stream)", embedded(BEDROCK, v.data), v.bound))
    return cases


@dataclass
class CaseResult:
    kind: str
    name: str
    split_dependent: bool
    problems: list[str]
    max_buffered: int
    over_bound: int
    bound: int
    worst: tuple[int, int]


def check_case(
    kind: str,
    name: str,
    data: bytes,
    bound: int,
    *,
    rng: random.Random,
    random_splits: int,
    bytewise: bool,
) -> CaseResult:
    runs = [
        run(kind, bound, pieces) for pieces in splits(data, rng, random_splits, bytewise=bytewise)
    ]
    first = runs[0].transcript
    return CaseResult(
        kind,
        name,
        any(r.transcript != first for r in runs[1:]),
        sorted({p for r in runs for p in r.problems}),
        max(r.max_buffered for r in runs),
        max(r.over_bound for r in runs),
        bound,
        max((r.worst for r in runs), key=lambda w: w[0] / w[1]),
    )
