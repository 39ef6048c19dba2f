"""Output guardrails on live streams: a secret split at every position, in every channel.

An upstream streams a text that carries a secret (an ``sk-`` key, or a code word for
the keyword rules), split into 2 chunks at every position of the text, and into 3
chunks at every pair of positions from the secret's first character to just after its
last. It does so in each text channel the gateway guards (docs/guardrails.md): a
choice's ``content`` (whose chunks also carry ``logprobs`` spelling each piece),
``reasoning_content`` (or ``reasoning``), ``refusal``, a tool call's ``arguments``
(alone, or the second of two parallel calls with interleaved fragments), and the
content of choice 1 with ``n = 2``. Six guardrails, one per route: a regex, a keyword
list and the ``pii`` API-key detector, each with ``block`` and with ``redact``.

What counts as a release: any substring of the secret of 8 or more characters in what
the client received, in one channel's concatenated text or anywhere in the raw body.
Each vector is also held to the whole-text answer: a blocked channel shows exactly the
text before the secret and the stream ends with ``guardrail_blocked`` (no ``[DONE]``);
a redacted one shows the text with ``[REDACTED]`` in place of the secret and ends with
``[DONE]``.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import random
import string
from collections import Counter
from dataclasses import dataclass
from typing import Any

from bench.resilience.harness import Context, Gateway, Row, gateway
from tests.support.fake_openai import DONE
from tests.support.fake_upstream import FakeUpstream, Pause, Reply, Step
from tests.support.gateway import UPSTREAM_KEY, openai_connection_toml
from tests.support.raw_http import RawClient, RawResponse, exchange, get, post

_RNG = random.Random(916)
KEY = "sk-" + "".join(_RNG.choice(string.ascii_lowercase) for _ in range(26))
WORD = "".join(_RNG.choice(string.ascii_lowercase) for _ in range(24))
RELEASE = 8
"""Consecutive characters of the secret that count as released."""


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


def _steps(v: Vector) -> list[Step]:
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


# --- the client's side ---------------------------------------------------------------


def _request(v: Vector) -> bytes:
    doc: dict[str, Any] = {
        "model": v.rail.route,
        "stream": True,
        "messages": [{"role": "user", "content": v.tag}],
    }
    if v.channel == "choice1":
        doc["n"] = 2
    if v.channel in ("tool", "tool1"):
        doc["tools"] = [
            {
                "type": "function",
                "function": {"name": "lookup", "parameters": {"type": "object"}},
            }
        ]
    return json.dumps(doc).encode()


def channels(body: bytes) -> tuple[dict[tuple[int, str, int], str], list[Any]]:
    """What the client received: each channel's concatenated text, and every event
    (parsed JSON, or the bytes ``[DONE]``)."""
    texts: dict[tuple[int, str, int], str] = {}
    events: list[Any] = []
    for block in body.split(b"\n\n"):
        for line in block.split(b"\n"):
            if not line.startswith(b"data:"):
                continue
            data = line[5:].strip()
            if data == b"[DONE]":
                events.append(data)
                continue
            doc = json.loads(data)
            events.append(doc)
            for choice in doc.get("choices") or ():
                delta, index = choice.get("delta") or {}, choice.get("index", 0)
                for field in ("content", "reasoning_content", "reasoning", "refusal"):
                    if isinstance(delta.get(field), str):
                        k = (index, field, 0)
                        texts[k] = texts.get(k, "") + delta[field]
                for call in delta.get("tool_calls") or ():
                    args = (call.get("function") or {}).get("arguments")
                    if isinstance(args, str):
                        k = (index, "arguments", call.get("index", 0))
                        texts[k] = texts.get(k, "") + args
    return texts, events


def longest_part(secret: str, text: str) -> int:
    """The length of the longest substring of ``secret`` that ``text`` contains."""
    best = 0
    for i in range(len(secret)):
        while i + best < len(secret) and secret[i : i + best + 1] in text:
            best += 1
    return best


@dataclass
class Verdict:
    vector: Vector
    released: int  # longest substring of the secret the client got (body or channel)
    ending_ok: bool
    text_ok: bool
    problem: str = ""


def judge(v: Vector, response: RawResponse) -> Verdict:
    texts, events = channels(response.body)
    raw = response.body.decode(errors="replace")
    released = max(
        [longest_part(v.rail.secret, raw)]
        + [longest_part(v.rail.secret, t) for t in texts.values()]
    )
    last = events[-1] if events else None
    if v.rail.action == "block":
        error = last.get("error") if isinstance(last, dict) else None
        ending_ok = (
            isinstance(error, dict)
            and error.get("code") == "guardrail_blocked"
            and b"[DONE]" not in events
        )
    else:
        ending_ok = last == b"[DONE]" and not any(
            isinstance(e, dict) and "error" in e for e in events
        )
    got = texts.get(v.key, "")
    text_ok = got == v.expected
    problem = ""
    if released >= RELEASE or not ending_ok or not text_ok:
        problem = f"{v.rail.route}/{v.channel} cuts {v.cuts}: got {got!r}, last {last!r}"[:400]
    return Verdict(v, released, ending_ok, text_ok and response.status == 200, problem)


async def _send(gw: Gateway, v: Vector) -> RawResponse:
    client = await RawClient.connect(gw.host, gw.port)
    try:
        await client.send(post("/v1/chat/completions", _request(v), gw.key))
        return await asyncio.wait_for(client.read_response(), 15)
    finally:
        await client.close()


async def _logged(gw: Gateway, v: Vector, response: RawResponse) -> int:
    """The longest run of the secret in the request's log entry (-1: no entry)."""
    request_id = response.headers.get("x-request-id", "")
    entry = await exchange(gw.host, gw.port, get(f"/v1/requests/{request_id}", gw.key))
    if entry.status != 200:
        return -1
    return longest_part(v.rail.secret, entry.body.decode(errors="replace"))


def _config(fake: FakeUpstream) -> str:
    out = "[server]\nsse_keepalive_interval = 0\n" + openai_connection_toml(fake.base_url)
    for rail in RAILS:
        out += f'\n[[routes]]\nname = "{rail.route}"\nchain = [ {{ model = "test/gpt-fake" }} ]\n'
        out += (
            f'\n[[guardrails]]\nname = "{rail.route}"\nstage = "output"\n'
            f'action = "{rail.action}"\n{rail.toml}\n'
            f'applies_to = {{ routes = ["{rail.route}"] }}\n'
        )
    return out


async def output_guardrails(ctx: Context) -> list[Row]:
    every = vectors()
    chosen = every if ctx.tier == "full" else sample(every, ctx)
    fake = VectorUpstream({v.tag: Reply.stream(*_steps(v)) for v in chosen})
    await fake.start()
    verdicts: list[Verdict] = []
    failures: Counter[str] = Counter()
    log_runs: list[int] = []  # per log entry read: the longest run of the secret in it
    log_every = 1 if ctx.tier == "fast" else 10
    try:
        async with gateway(
            ctx, _config(fake), name="guardrails", env={"FAKE_UPSTREAM_KEY": UPSTREAM_KEY}
        ) as gw:
            queue = list(reversed(chosen))

            async def worker() -> None:
                while queue:
                    v = queue.pop()
                    try:
                        response = await _send(gw, v)
                        verdicts.append(judge(v, response))
                        if v.number % log_every == 0 or ctx.tier == "fast":
                            log_runs.append(await _logged(gw, v, response))
                    except (OSError, TimeoutError, asyncio.IncompleteReadError, ValueError) as e:
                        failures[type(e).__name__] += 1
                        verdicts.append(Verdict(v, 0, False, False, f"{v.tag}: {e!r}"))

            await asyncio.gather(*(worker() for _ in range(16)))
    finally:
        await fake.close()
    errors = ", ".join(f"{count} {name}" for name, count in failures.items())
    log_leaks = sum(r >= RELEASE or r < 0 for r in log_runs)
    rows = []
    for action in ("block", "redact"):
        mine = [x for x in verdicts if x.vector.rail.action == action]
        releases = [x for x in mine if x.released >= RELEASE]
        endings = sum(not x.ending_ok for x in mine)
        texts = sum(not x.text_ok for x in mine)
        longest = max((x.released for x in mine), default=0)
        problems = [x.problem for x in mine if x.problem][:2]
        splits = Counter(len(x.vector.cuts) + 1 for x in mine)
        ending = "guardrail_blocked" if action == "block" else "[DONE]"
        rows.append(
            Row(
                f"output guardrails on live streams: {action}",
                f"{len(mine)} vectors ({splits[2]} in 2 chunks, {splits[3]} in 3; regex, "
                "keywords and pii; content with logprobs, reasoning, refusal, tool-call "
                "arguments of one call and of the second of two, choice 1 of 2): "
                f"{len(releases)} releases of >= {RELEASE} characters of the "
                f"secret (longest common run {longest}), {endings} not ending with {ending}, "
                f"{texts} channel texts differing from the whole-text answer"
                + (f" ({errors})" if errors else "")
                + (f"; first: {'; '.join(problems)}" if problems else ""),
                f"0 releases (no substring of >= {RELEASE} characters of the secret in any "
                f"channel or the raw body), every stream ends with {ending}, every channel "
                "text equals the whole-text answer",
                bool(mine) and not releases and not endings and not texts,
            )
        )
    rows.append(
        Row(
            "output guardrails on live streams: the request log",
            f"{len(log_runs)} log entries of guarded streams read (GET /v1/requests/{{id}}): "
            f"{log_leaks} with >= {RELEASE} characters of the secret or missing (longest "
            f"run {max(log_runs, default=0)})",
            f"no entry missing, none with >= {RELEASE} characters of the secret",
            bool(log_runs) and log_leaks == 0,
        )
    )
    return rows
