"""The shape every translator's output must have, whatever the upstream sent."""

from __future__ import annotations

import msgspec
import pytest

from sluice.errors import UpstreamError
from sluice.providers.normalize import ChunkEmitter, canonical_choices, normalize_finish_reason
from sluice.wire.chunks import (
    CompletionChoice,
    Delta,
    FunctionDelta,
    ResponseMessage,
    ToolCallDelta,
)
from tests.support.gateway import counting_ids


def drain(emitter: ChunkEmitter) -> list[object]:
    return [msgspec.to_builtins(c) for c in emitter.take()]


def test_role_chunk_comes_first_once_per_choice() -> None:
    e = ChunkEmitter(counting_ids(), choices=2)
    e.text(1, "b")
    e.text(0, "a")
    e.text(1, "c")
    assert drain(e) == [
        [{"index": 1, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}],
        [{"index": 1, "delta": {"content": "b"}, "finish_reason": None}],
        [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}],
        [{"index": 0, "delta": {"content": "a"}, "finish_reason": None}],
        [{"index": 1, "delta": {"content": "c"}, "finish_reason": None}],
    ]


def test_whole_tool_call_is_split_into_first_fragment_and_arguments() -> None:
    e = ChunkEmitter(counting_ids())
    e.tool_call(0, 0, name="f", arguments='{"a":1}')  # no id: one is generated
    e.tool_call(0, 0, name="f", id="ignored", arguments="")  # repeats are dropped
    e.finish(0, "stop")  # a choice that called tools finishes with tool_calls
    chunks = drain(e)[1:]
    assert chunks == [
        [
            {
                "index": 0,
                "delta": {
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "call_000001",
                            "type": "function",
                            "function": {"name": "f", "arguments": ""},
                        }
                    ]
                },
                "finish_reason": None,
            }
        ],
        [
            {
                "index": 0,
                "delta": {"tool_calls": [{"index": 0, "function": {"arguments": '{"a":1}'}}]},
                "finish_reason": None,
            }
        ],
        [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}],
    ]


def test_delta_with_content_and_finish_becomes_two_chunks_and_nothing_follows() -> None:
    e = ChunkEmitter(counting_ids())
    e.delta(0, Delta(role="assistant", content="last"), "stop")
    e.text(0, "after the end")
    e.finish(0, "length")
    assert drain(e)[1:] == [
        [{"index": 0, "delta": {"content": "last"}, "finish_reason": None}],
        [{"index": 0, "delta": {}, "finish_reason": "stop"}],
    ]


def test_empty_and_null_fields_are_not_emitted() -> None:
    e = ChunkEmitter(counting_ids())
    e.delta(0, Delta(content=None, reasoning_content="", refusal=None, tool_calls=[]))
    e.delta(0, Delta(tool_calls=[ToolCallDelta(0, function=FunctionDelta(arguments=""))]))
    assert len(drain(e)) == 2  # the role chunk and the tool call's first fragment
    assert e.output_chars == 0


@pytest.mark.parametrize(
    ("reason", "tools", "expected"),
    [
        ("stop", False, "stop"),
        ("stop", True, "tool_calls"),
        ("length", True, "length"),
        ("function_call", False, "stop"),
        ("end_turn", False, "stop"),
        ("content_filter", False, "content_filter"),
        ("tool_calls", True, "tool_calls"),
    ],
)
def test_finish_reasons(reason: str, tools: bool, expected: str) -> None:
    assert normalize_finish_reason(reason, tools) == expected


def test_check_complete() -> None:
    e = ChunkEmitter(counting_ids(), choices=2)
    with pytest.raises(UpstreamError) as info:
        e.check_complete()
    assert info.value.code == "upstream_empty"
    e.text(0, "x")
    e.text(1, "y")
    e.finish(0, "stop")
    with pytest.raises(UpstreamError) as info:
        e.check_complete()
    assert info.value.code == "stream_incomplete"
    e.finish(1, "stop")
    e.check_complete()


def test_many_small_argument_fragments_join_exactly() -> None:
    e = ChunkEmitter(counting_ids(), choices=2)
    arguments = '{"text": "' + "".join(chr(97 + i % 26) for i in range(40_000)) + '"}'
    e.tool_call(0, 0, id="call_a", name="f")
    e.tool_call(1, 0, name="g", arguments="{}")
    for start in range(0, len(arguments), 4):
        e.tool_call(0, 0, arguments=arguments[start : start + 4])
    e.tool_call(0, 1, name="h")
    e.finish(0, "stop")
    assert [msgspec.to_builtins(c) for c in e.tool_calls()] == [
        {"choice": 0, "index": 0, "id": "call_a", "name": "f", "arguments": arguments},
        {"choice": 1, "index": 0, "id": "call_000001", "name": "g", "arguments": "{}"},
        {"choice": 0, "index": 1, "id": "call_000002", "name": "h", "arguments": ""},
    ]
    assert e.output_chars == len(arguments) + 2


def test_tool_calls_are_numbered_in_order_of_first_appearance() -> None:
    """Gaps, negatives and huge indices from the upstream become 0, 1, 2 per choice."""
    e = ChunkEmitter(counting_ids(), choices=2)
    e.tool_call(0, 0, id="call_a", name="a")
    e.tool_call(0, 2, id="call_z", name="z")
    e.tool_call(0, -1, id="call_m", name="m", arguments="{}")
    e.tool_call(1, 7, id="call_b", name="b")
    e.tool_call(0, 2, arguments='{"z": 1}')
    e.finish(0, "stop")
    e.finish(1, "stop")
    sent = [
        (c[0].index, t.index, t.id)
        for c in e.take()
        for t in (c[0].delta.tool_calls or [])
        if isinstance(t, ToolCallDelta)
    ]
    assert sent == [
        (0, 0, "call_a"),
        (0, 1, "call_z"),
        (0, 2, "call_m"),
        (0, 2, msgspec.UNSET),
        (1, 0, "call_b"),
        (0, 1, msgspec.UNSET),
    ]
    assert [(c.choice, c.index, c.arguments) for c in e.tool_calls()] == [
        (0, 0, ""),
        (0, 1, '{"z": 1}'),
        (0, 2, "{}"),
        (1, 0, ""),
    ]
    assert [(r.kind, r.choice, r.upstream_index, r.index) for r in e.repairs] == [
        ("tool_call_renumbered", 0, 2, 1),
        ("tool_call_renumbered", 0, -1, 2),
        ("tool_call_renumbered", 1, 7, 0),
    ]


@pytest.mark.parametrize("index", [-1, 1, 128])
def test_a_choice_the_request_did_not_ask_for_is_dropped_and_noted(index: int) -> None:
    e = ChunkEmitter(counting_ids(), choices=1)
    e.text(index, "not asked for")
    e.tool_call(index, 0, id="call_x", name="x")
    e.finish(index, "stop")
    e.text(0, "mine")
    e.finish(0, "stop")
    assert {c[0].index for c in e.take()} == {0}
    e.check_complete()  # the dropped choice is not waited for
    assert e.tool_calls() == []
    assert [(r.kind, r.choice) for r in e.repairs] == [("choice_dropped", index)]


def test_a_whole_answer_keeps_the_first_of_each_choice_asked_for() -> None:
    def choice(index: int) -> CompletionChoice:
        return CompletionChoice(index, ResponseMessage(content=str(index)), "stop")

    kept, repairs = canonical_choices([choice(0), choice(3), choice(0), choice(1)], 2)
    assert [(c.index, c.message.content) for c in kept] == [(0, "0"), (1, "1")]
    assert [(r.kind, r.choice) for r in repairs] == [("choice_dropped", 3), ("choice_dropped", 0)]
    with pytest.raises(UpstreamError) as info:
        canonical_choices([choice(4)], 1)
    assert info.value.code == "upstream_empty"
