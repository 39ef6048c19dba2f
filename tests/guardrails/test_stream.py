"""The output filter over chunk batches: text channels, pass-through chunks, order."""

from __future__ import annotations

import itertools
import json

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from sluice.core.batch import ChunkBatch
from sluice.errors import GuardrailBlockedError
from sluice.guardrails.rule import Note
from sluice.guardrails.stream import StreamGuard
from sluice.wire.chunks import (
    Choice,
    CompletionChoice,
    Delta,
    FunctionDelta,
    ResponseFunctionCall,
    ResponseMessage,
    ResponseToolCall,
    ToolCallDelta,
)
from tests.guardrails.oracle import Spec, whole_text
from tests.guardrails.test_window import ALPHABET, PATTERNS, splits

ROLE = [Choice(0, Delta(role="assistant", content=""), None)]
STOP = [Choice(0, Delta(), "stop")]
KEY = Spec("no-keys", "redact", r"sk-[0-9]{4}")
BLOCK = Spec("no-bad", "block", r"bad!")


def text_chunk(text: str, index: int = 0) -> list[Choice]:
    return [Choice(index, Delta(content=text), None)]


def args_chunk(call: int, arguments: str) -> list[Choice]:
    fn = FunctionDelta(arguments=arguments)
    return [Choice(0, Delta(tool_calls=[ToolCallDelta(call, function=fn)]), None)]


def head_chunk(call: int, name: str) -> list[Choice]:
    call_delta = ToolCallDelta(call, f"call_{call}", "function", FunctionDelta(name, ""))
    return [Choice(0, Delta(tool_calls=[call_delta]), None)]


def content(batch: ChunkBatch, index: int = 0) -> str:
    return "".join(
        c.delta.content
        for choices in batch
        for c in choices
        if c.index == index and isinstance(c.delta.content, str)
    )


def arguments(batch: ChunkBatch, call: int) -> str:
    return "".join(
        t.function.arguments
        for choices in batch
        for c in choices
        for t in (c.delta.tool_calls or [])
        if t.index == call
        and isinstance(t.function, FunctionDelta)
        and isinstance(t.function.arguments, str)
    )


def run(guard: StreamGuard, batches: list[ChunkBatch]) -> ChunkBatch:
    out: ChunkBatch = []
    for batch in batches:
        out += guard.filter(batch)
    return out + guard.finish()


@st.composite
def grouped(draw: st.DrawFn, chunks: list[list[Choice]]) -> list[ChunkBatch]:
    """The chunks cut into consecutive batches (one upstream read each)."""
    cuts = sorted(draw(st.sets(st.integers(0, len(chunks)))))
    bounds = [0, *cuts, len(chunks)]
    return [chunks[a:b] for a, b in itertools.pairwise(bounds)]


@settings(max_examples=300, deadline=None)
@given(st.text(ALPHABET, max_size=60), st.data())
def test_any_chunking_of_a_stream_gives_the_whole_text_result(
    text: str, data: st.DataObject
) -> None:
    chosen = data.draw(st.lists(st.sampled_from(PATTERNS), min_size=1, max_size=2))
    specs = [
        Spec(f"r{i}", data.draw(st.sampled_from(["block", "redact", "log"])), p, hold_back=h)
        for i, (p, h) in enumerate(chosen)
    ]
    chunks = [ROLE, *(text_chunk(p) for p in data.draw(splits(text)) if p), STOP]
    notes: list[Note] = []
    guard = StreamGuard([s.rule for s in specs], [], notes)
    out = run(guard, data.draw(grouped(chunks)))
    visible, hits, blocked = whole_text(text, specs)
    assert content(out) == visible
    assert (guard.failure is not None) == blocked
    assert out[0] == ROLE
    assert (out[-1] == STOP) == (not blocked)
    assert {n.name for n in notes} == set(hits)


def test_a_block_keeps_what_was_released_and_ends_the_stream() -> None:
    notes: list[Note] = []
    guard = StreamGuard([BLOCK.rule], [], notes)
    first = guard.filter([ROLE, text_chunk("All good so far, and ")])
    assert content(first) == "All good so far,"  # "bad!" is 4 long: 5 held back
    second = guard.filter([text_chunk("then ba"), text_chunk("d! more"), STOP])
    assert content(second) == " and then "
    assert isinstance(guard.failure, GuardrailBlockedError)
    assert guard.failure.code == "guardrail_blocked"
    assert "no-bad" in guard.failure.message and "bad!" not in guard.failure.message
    assert guard.filter([text_chunk("x"), STOP]) == [] and guard.finish() == []
    assert notes == [Note("no-bad", "output", "block", "blocked")]


def test_tool_call_arguments_are_checked_per_call() -> None:
    notes: list[Note] = []
    guard = StreamGuard([KEY.rule], [], notes)
    chunks = [
        ROLE,
        head_chunk(0, "lookup"),
        args_chunk(0, '{"key": "sk-1'),
        head_chunk(1, "send"),
        args_chunk(1, '{"to": "sk-'),
        args_chunk(0, '234"}'),
        args_chunk(1, '9"}'),
        [Choice(0, Delta(), "tool_calls")],
    ]
    out = run(guard, [[c] for c in chunks])
    assert json.loads(arguments(out, 0)) == {"key": "[REDACTED]"}
    assert json.loads(arguments(out, 1)) == {"to": "sk-9"}  # "sk-" + "9" is no key
    heads = [
        t.function.name
        for choices in out
        for c in choices
        for t in (c.delta.tool_calls or [])
        if isinstance(t.function, FunctionDelta) and isinstance(t.function.name, str)
    ]
    assert heads == ["lookup", "send"]
    assert out[:2] == [ROLE, head_chunk(0, "lookup")]  # nothing held: no text yet
    assert out[-1][0].finish_reason == "tool_calls"
    assert notes == [Note("no-keys", "output", "redact", "redacted")]


def test_choices_and_reasoning_have_their_own_windows() -> None:
    guard = StreamGuard([KEY.rule], [], [])
    chunks = [
        ROLE,
        [Choice(1, Delta(role="assistant", content=""), None)],
        [Choice(0, Delta(reasoning_content="think sk-12"), None)],
        text_chunk("say sk-", 1),
        [Choice(0, Delta(reasoning_content="34 done"), None)],
        text_chunk("5678", 1),
        STOP,
        [Choice(1, Delta(), "stop")],
    ]
    out = run(guard, [chunks])
    reasoning = "".join(
        c.delta.reasoning_content
        for choices in out
        for c in choices
        if isinstance(c.delta.reasoning_content, str)
    )
    assert reasoning == "think [REDACTED] done"
    assert content(out, 1) == "say [REDACTED]"
    finishes = [c.index for choices in out for c in choices if c.finish_reason]
    assert finishes == [0, 1]


def test_logprobs_are_dropped_because_they_spell_the_held_text() -> None:
    raw = msgspec.Raw(b'{"content":[{"token":"sk-1234"}]}')
    chunk = [Choice(0, Delta(content="sk-1234"), None, raw)]
    out = run(StreamGuard([KEY.rule], [], []), [[ROLE, chunk, STOP]])
    assert all(c.logprobs is msgspec.UNSET for choices in out for c in choices)
    assert content(out) == "[REDACTED]"


def test_a_whole_answer_is_checked_at_once() -> None:
    message = ResponseMessage(
        content="my key is sk-1234",
        tool_calls=[ResponseToolCall(id="c1", function=ResponseFunctionCall("f", '"sk-5678"'))],
    )
    notes: list[Note] = []
    guard = StreamGuard([KEY.rule], [], notes)
    [choice] = guard.completion([CompletionChoice(0, message, "stop")])
    assert choice.message.content == "my key is [REDACTED]"
    assert isinstance(choice.message.tool_calls, list)
    assert choice.message.tool_calls[0].function.arguments == '"[REDACTED]"'
    assert guard.failure is None and len(notes) == 1
    blocked = StreamGuard([BLOCK.rule], [], [])
    blocked.completion([CompletionChoice(0, ResponseMessage(content="so bad!"), "stop")])
    assert isinstance(blocked.failure, GuardrailBlockedError)
