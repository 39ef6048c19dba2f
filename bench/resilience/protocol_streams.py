"""Hostile upstream streams for the stream translators (the "malformed SSE and event
streams" rows): one run of a translator over one split of a stream, with everything
the rows check recorded; the recorded fixtures, and the hand vectors' shape (the
vectors: ``protocol_vectors_sse``, ``protocol_vectors_eventstream``).

A translator (``AdapterRegistry(...).adapter(kind).stream(req)``) is fed the pieces
of a stream as the transport would feed its reads, then finished. Its *transcript*
(every chunk it produced, then how it ended, its usage and output size) must not
depend on the split; ``feed`` must never raise; ``finish`` may raise only an
:class:`~sluice.errors.ApiError`; and its decoder's ``buffered`` must stay within the
documented bound: ``max_event_bytes`` for SSE ("never above the limit"), one
message's worth plus the last read for the AWS event stream.
"""

from __future__ import annotations

import itertools
import json
import random
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from sluice.errors import ApiError
from sluice.frontdoors.chat import decode_chat_request
from sluice.ids import IdFactory
from sluice.providers.base import StreamTranslator
from sluice.providers.bedrock.stream import BedrockStreamTranslator
from sluice.providers.registry import AdapterRegistry
from sluice.providers.sse_stream import SSEStreamTranslator
from sluice.wire.chat import ChatRequest

FIXTURES = Path(__file__).resolve().parents[2] / "tests" / "fixtures"
SSE_KINDS = ("openai", "anthropic", "gemini")
BEDROCK = "aws-bedrock"
KINDS = (*SSE_KINDS, BEDROCK)
SMALL = 1024
"""The decoder bound most vectors are sized against (so "endless" is a few KiB)."""
BOM = b"\xef\xbb\xbf"
DEEP = 100_000


def counting_ids() -> IdFactory:
    counter = itertools.count(1)
    return lambda prefix: f"{prefix}_{next(counter):06d}"


def stream_request() -> ChatRequest:
    body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "x"}]}
    return decode_chat_request(json.dumps(body).encode())


_REQUEST = stream_request()


def translator(kind: str, bound: int) -> StreamTranslator:
    return AdapterRegistry(counting_ids(), bound).adapter(kind).stream(_REQUEST)


def buffered(t: StreamTranslator) -> int:
    """Bytes the translator's decoder holds right now."""
    if isinstance(t, SSEStreamTranslator):
        return t._sse.buffered
    if isinstance(t, BedrockStreamTranslator):
        return t._decoder.buffered
    raise TypeError(f"no decoder known for {type(t).__name__}")


def _plain(value: object) -> Any:
    return json.loads(msgspec.json.encode(value))


@dataclass
class Run:
    """One translator over one split of one stream."""

    transcript: list[Any]
    problems: list[str] = field(default_factory=list)
    """``feed`` raising, ``finish`` raising something that is not an ApiError."""
    max_buffered: int = 0
    over_bound: int = 0
    """The most bytes ``buffered`` was above its bound (0: never)."""
    worst: tuple[int, int] = (0, 1)
    """(buffered, its cap) where buffered came closest to (or went furthest past) its cap."""


def run(kind: str, bound: int, pieces: Sequence[bytes]) -> Run:
    t = translator(kind, bound)
    sse = isinstance(t, SSEStreamTranslator)
    out: list[Any] = []
    result = Run(out)
    for piece in pieces:
        try:
            batch = t.feed(piece)
        except Exception as exc:  # the one thing feed must never do
            result.problems.append(f"feed raised {type(exc).__name__}: {str(exc)[:80]}")
            out.append({"feed raised": type(exc).__name__})
            return result
        out.extend(_plain(choices) for choices in batch)
        held = buffered(t)
        cap = bound if sse else bound + len(piece)
        result.max_buffered = max(result.max_buffered, held)
        result.over_bound = max(result.over_bound, held - cap)
        if held * result.worst[1] > result.worst[0] * cap:
            result.worst = (held, cap)
        if t.failure is not None:
            break  # the gateway stops reading an upstream that failed
    end: Any
    try:
        out.extend(_plain(choices) for choices in t.finish())
        end = "complete"
    except ApiError as exc:
        end = {"type": exc.type, "code": exc.code}
    except Exception as exc:
        result.problems.append(f"finish raised {type(exc).__name__}: {str(exc)[:80]}")
        end = {"finish raised": type(exc).__name__}
    out.append({"end": end, "usage": _plain(t.usage), "output_chars": t.output_chars})
    return result


def splits(data: bytes, rng: random.Random, count: int, *, bytewise: bool) -> Iterator[list[bytes]]:
    """The splits a stream is fed in: whole, byte by byte (or in 61-byte pieces), then
    ``count`` random splits (1 to 16 cuts, or reads of 1 to 64 bytes)."""
    yield [data]
    step = 1 if bytewise else 61
    yield [data[i : i + step] for i in range(0, len(data), step)]
    for n in range(count):
        if len(data) < 2:
            return
        if n % 2:
            cuts = sorted(rng.sample(range(1, len(data)), k=min(len(data) - 1, rng.randint(1, 16))))
        else:
            cuts, at = [], 0
            while (at := at + rng.randint(1, 64)) < len(data):
                cuts.append(at)
        yield [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]


# --- fixtures -----------------------------------------------------------------------


def fixture(folder: str, case: str = "text") -> bytes:
    return (FIXTURES / folder / f"{case}.raw").read_bytes()


def sse_events(raw: bytes) -> list[bytes]:
    """A recorded SSE stream cut into its events (each with its blank line)."""
    body = raw.replace(b"\r\n", b"\n")
    return [e + b"\n\n" for e in body.split(b"\n\n") if e.strip()]


def frames(raw: bytes) -> list[bytes]:
    """A recorded event stream cut into its frames."""
    out, at = [], 0
    while at + 4 <= len(raw):
        (total,) = struct.unpack_from("!I", raw, at)
        if total < 16:
            break
        out.append(raw[at : at + total])
        at += total
    return out


def embedded(kind: str, hostile: bytes) -> bytes:
    """``hostile`` inside that provider's valid text stream, after its first events."""
    if kind == BEDROCK:
        parts = frames(fixture(BEDROCK))
        return b"".join(parts[:2]) + hostile + b"".join(parts[2:])
    parts = sse_events(fixture(kind))
    return b"".join(parts[:2]) + hostile + b"".join(parts[2:])


# --- a hand vector ------------------------------------------------------------------


@dataclass(frozen=True)
class Vector:
    name: str
    data: bytes
    bound: int = SMALL
    """The decoder bound this vector is run with (the default bound for the 100,000-deep
    JSON, which would otherwise be refused as too large before it is parsed)."""
