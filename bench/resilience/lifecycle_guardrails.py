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
``[DONE]``. The vectors, and the upstream that streams them: ``lifecycle_guardrail_vectors``.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from dataclasses import dataclass
from typing import Any

from bench.resilience.harness import Context, Gateway, Row, gateway
from bench.resilience.lifecycle_guardrail_vectors import (
    RAILS,
    Vector,
    VectorUpstream,
    sample,
    upstream_steps,
    vectors,
)
from tests.support.fake_upstream import FakeUpstream, Reply
from tests.support.gateway import UPSTREAM_KEY, openai_connection_toml
from tests.support.raw_http import RawClient, RawResponse, exchange, get, post

RELEASE = 8
"""Consecutive characters of the secret that count as released."""


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
    fake = VectorUpstream({v.tag: Reply.stream(*upstream_steps(v)) for v in chosen})
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
