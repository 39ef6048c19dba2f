"""The vectors of the "output guardrails on live streams" rows (``lifecycle_guardrails``),
and the upstream that streams them.

A vector is a text carrying a secret (an ``sk-`` key, or a code word for the keyword
rules) in one text channel, split into 2 chunks at one position of the text or into 3
at a pair of positions from the secret's first character to just after its last, for
one of six guardrails (a regex, a keyword list and the ``pii`` API-key detector, each
with ``block`` and with ``redact``), each on a route of its own.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import random
import string
from dataclasses import dataclass
from typing import Any

from bench.resilience.harness import Context
from tests.support.fake_openai import DONE
from tests.support.fake_upstream import FakeUpstream, Pause, Reply, Step

_RNG = random.Random(916)
KEY = "sk-" + "".join(_RNG.choice(string.ascii_lowercase) for _ in range(26))
WORD = "".join(_RNG.choice(string.ascii_lowercase) for _ in range(24))


@dataclass(frozen=True)
class Rail:
    route: str
    action: str
    secret: str
    toml: str  # the kind-specific keys


RAILS = (
    Rail("keys-block", "block", KEY, 'kind = "regex"\npattern = "sk-[A-Za-z0-9]{20,}"'),
    Rail("keys-redact", "redact", KEY, 'kind = "regex"\npattern = "sk-[a-z]{26}"'),
    Rail("word-block", "block", WORD, f'kind = "keywords"\nwords = ["{WORD}"]'),
    Rail("word-redact", "redact", WORD, f'kind = "keywords"\nwords = ["{WORD}"]'),
    Rail("pii-block", "block", KEY, 'kind = "pii"\nentities = ["api_key"]'),
    Rail("pii-redact", "redact", KEY, 'kind = "pii"\nentities = ["api_key"]'),
)
CHANNELS = ("content", "reasoning", "refusal", "tool", "tool1", "choice1")
FILLER = "Nothing to see in this choice, move along please."
OTHER_CALL = '{"city": "Paris", "unit": "celsius", "days": 3}'


def _around(rail: Rail, channel: str) -> tuple[str, str]:
    """The text before and after the secret in ``channel``."""
    if channel in ("tool", "tool1"):
        return '{"token": "', '", "note": "keep it safe"}'
    if rail.secret == KEY:
        return "The key is ", ", keep it safe."
    return "The code word is ", " and nobody may know."


@dataclass(frozen=True)
class Vector:
    number: int
    rail: Rail
    channel: str
    cuts: tuple[int, ...]

    @property
    def tag(self) -> str:
        return f"vector {self.number}"

    @property
    def text(self) -> str:
        before, after = _around(self.rail, self.channel)
        return before + self.rail.secret + after

    @property
    def pieces(self) -> list[str]:
        bounds = (0, *self.cuts, len(self.text))
        return [self.text[a:b] for a, b in itertools.pairwise(bounds)]

    @property
    def expected(self) -> str:
        """The channel's text as the whole-text answer has it."""
        before, after = _around(self.rail, self.channel)
        return before if self.rail.action == "block" else before + "[REDACTED]" + after

    @property
    def key(self) -> tuple[int, str, int]:
        """The client-side channel the secret travels in: (choice, field, tool call)."""
        if self.channel in ("tool", "tool1"):
            return (0, "arguments", 1 if self.channel == "tool1" else 0)
        field = {"reasoning": "reasoning_content", "choice1": "content"}
        return (1 if self.channel == "choice1" else 0, field.get(self.channel, self.channel), 0)


def vectors() -> list[Vector]:
    """Every vector: per rail and channel, 2 chunks split at every position of the text,
    then 3 chunks split at every pair of positions from the secret's start to its end
    (inclusive)."""
    out: list[Vector] = []
    for rail in RAILS:
        for channel in CHANNELS:
            before, _ = _around(rail, channel)
            length = len(before) + len(rail.secret) + len(_around(rail, channel)[1])
            start, end = len(before), len(before) + len(rail.secret)
            splits: list[tuple[int, ...]] = [(c,) for c in range(1, length)]
            splits += list(itertools.combinations(range(start, end + 1), 2))
            out += [Vector(len(out) + i, rail, channel, cuts) for i, cuts in enumerate(splits)]
    return out


def sample(all_vectors: list[Vector], ctx: Context) -> list[Vector]:
    """The fast tier: one vector per rail and channel (36), seeded, split into 2 and 3
    chunks in turn."""
    rng = random.Random(ctx.seed)
    groups: dict[tuple[str, str, int], list[Vector]] = {}
    for v in all_vectors:
        groups.setdefault((v.rail.route, v.channel, len(v.cuts)), []).append(v)
    pairs = sorted({(route, channel) for route, channel, _ in groups})
    return [rng.choice(groups[(*pair, 1 + i % 2)]) for i, pair in enumerate(pairs)]


# --- the upstream's side -------------------------------------------------------------


def _event(choices: list[dict[str, Any]], **extra: Any) -> bytes:
    doc = {
        "id": "chatcmpl-lifecycle",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": "gpt-fake",
        "choices": choices,
        **extra,
    }
    return b"data: " + json.dumps(doc, separators=(",", ":")).encode() + b"\n\n"


def _choice(index: int, delta: dict[str, Any], finish: str | None = None, **extra: Any) -> Any:
    return {"index": index, "delta": delta, "finish_reason": finish, **extra}


def _logprobs(piece: str) -> dict[str, Any]:
    return {"content": [{"token": piece, "logprob": -0.1, "bytes": None, "top_logprobs": []}]}


def _call(index: int, arguments: str, call_id: str | None = None) -> dict[str, Any]:
    if call_id is None:
        return {"index": index, "function": {"arguments": arguments}}
    function = {"name": "lookup", "arguments": arguments}
    return {"index": index, "id": call_id, "type": "function", "function": function}


def _interleave(one: list[bytes], two: list[bytes]) -> list[bytes]:
    out = []
    for a, b in itertools.zip_longest(one, two):
        out += [x for x in (a, b) if x is not None]
    return out


def upstream_steps(v: Vector) -> list[Step]:
    """The upstream's stream for ``v``. Variants by the vector's number: every other
    one paces its chunks (2 ms) so the gateway reads them one by one, the others
    arrive as fast as they are written; and, independently of that, content puts the
    finish reason on a chunk of its own or on the last piece's; reasoning is spelled
    ``reasoning_content`` or ``reasoning``; a tool call's first fragment carries the
    first piece or nothing; two choices come in separate events or in one."""
    pieces, number = v.pieces, v.number
    variant = number // 2 % 2 == 1
    index = 1 if v.channel == "choice1" else 0
    chunks: list[bytes] = [_event([_choice(0, {"role": "assistant", "content": ""})])]
    finish: str | None = "stop"
    if v.channel == "content":
        chunks += [_event([_choice(0, {"content": p}, logprobs=_logprobs(p))]) for p in pieces]
        if variant:
            last = _choice(0, {"content": pieces[-1]}, "stop", logprobs=_logprobs(pieces[-1]))
            chunks[-1], finish = _event([last]), None
    elif v.channel == "reasoning":
        name = "reasoning_content" if variant else "reasoning"
        chunks += [_event([_choice(0, {name: p})]) for p in pieces]
        chunks.append(_event([_choice(0, {"content": "Done."})]))
    elif v.channel == "refusal":
        chunks += [_event([_choice(0, {"refusal": p})]) for p in pieces]
    elif v.channel == "tool":
        first = variant  # the first fragment carries the first piece too
        head = _call(0, pieces[0] if first else "", "call_secret")
        chunks.append(_event([_choice(0, {"tool_calls": [head]})]))
        chunks += [
            _event([_choice(0, {"tool_calls": [_call(0, p)]})]) for p in pieces[int(first) :]
        ]
        finish = "tool_calls"
    elif v.channel == "tool1":  # the second of two parallel calls, their fragments interleaved
        heads = [_call(0, "", "call_other"), _call(1, "", "call_secret")]
        chunks += [_event([_choice(0, {"tool_calls": [h]})]) for h in heads]
        other = [OTHER_CALL[i : i + 7] for i in range(0, len(OTHER_CALL), 7)]
        chunks += _interleave(
            [_event([_choice(0, {"tool_calls": [_call(0, p)]})]) for p in other],
            [_event([_choice(0, {"tool_calls": [_call(1, p)]})]) for p in pieces],
        )
        finish = "tool_calls"
    else:  # choice 1 of two; choice 0 is harmless; separate events or both in one
        chunks.append(_event([_choice(1, {"role": "assistant", "content": ""})]))
        step = max(1, len(FILLER) // len(pieces))
        filler = [FILLER[i : i + step] for i in range(0, len(FILLER), step)]
        if variant:
            for a, b in itertools.zip_longest(filler, pieces):
                both = [
                    _choice(0, {"content": a}) if a else None,
                    _choice(1, {"content": b}) if b else None,
                ]
                chunks.append(_event([c for c in both if c is not None]))
        else:
            chunks += _interleave(
                [_event([_choice(0, {"content": a})]) for a in filler],
                [_event([_choice(1, {"content": b})]) for b in pieces],
            )
        chunks.append(_event([_choice(0, {}, "stop")]))
    if finish is not None:
        chunks.append(_event([_choice(index, {}, finish)]))
    steps: list[Step] = []
    for c in chunks:
        steps.append(c)
        if number % 2 == 0:
            steps.append(Pause(0.002))
    usage = {"prompt_tokens": 10, "completion_tokens": 20, "total_tokens": 30}
    return [*steps, _event([], usage=usage), DONE]


class VectorUpstream(FakeUpstream):
    """Answers each request with the stream of the vector its user message names."""

    def __init__(self, by_tag: dict[str, Reply]) -> None:
        super().__init__()
        self.by_tag = by_tag

    async def _answer(
        self,
        reply: Reply,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        buffer: bytes,
    ) -> tuple[bool, bytes]:
        tag = self.requests[-1].json()["messages"][-1]["content"]
        return await super()._answer(self.by_tag.get(tag, reply), reader, writer, buffer)
