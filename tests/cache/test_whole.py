"""A kept answer folded whole, and a whole answer as the cache keeps it
(sluice/cache/whole.py): folding what :func:`unfolded` gives is the answer again."""

from __future__ import annotations

import msgspec
from msgspec import UNSET, Raw

from sluice.cache.whole import folded, unfolded
from sluice.core.batch import ChunkBatch
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
from sluice.wire.conversation import RedactedThinkingBlock, ThinkingBlock


def streamed(*deltas: tuple[int, Delta, str | None]) -> list[ChunkBatch]:
    return [[[Choice(index, delta, finish)]] for index, delta, finish in deltas]


def test_two_choices_fold_apart_in_index_order() -> None:
    choices = folded(
        streamed(
            (1, Delta(role="assistant", content="B"), None),
            (0, Delta(role="assistant", content="A"), None),
            (0, Delta(content="a"), "stop"),
            (1, Delta(content="b"), "length"),
        )
    )
    assert [(c.index, c.message.content, c.finish_reason) for c in choices] == [
        (0, "Aa", "stop"),
        (1, "Bb", "length"),
    ]


def test_signed_reasoning_folds_into_its_blocks() -> None:
    [choice] = folded(
        streamed(
            (0, Delta(reasoning_content="think "), None),
            (0, Delta(reasoning_content="more", reasoning_signature="sig1"), None),
            (0, Delta(redacted_reasoning="opaque"), None),
            (0, Delta(content="done"), "stop"),
        )
    )
    message = choice.message
    assert message.reasoning_content == "think more" and message.content == "done"
    assert message.thinking_blocks == [
        ThinkingBlock("think more", "sig1"),
        RedactedThinkingBlock("opaque"),
    ]


def test_tool_call_fragments_join() -> None:
    first = ToolCallDelta(0, "call_1", "function", FunctionDelta("add", '{"a":'))
    [choice] = folded(
        streamed(
            (0, Delta(role="assistant", tool_calls=[first]), None),
            (0, Delta(tool_calls=[ToolCallDelta(0, function=FunctionDelta(arguments="1}"))]), None),
            (0, Delta(), "tool_calls"),
        )
    )
    assert choice.message.content is None
    assert choice.message.tool_calls == [
        ResponseToolCall(id="call_1", function=ResponseFunctionCall("add", '{"a":1}'))
    ]


def test_a_whole_answer_unfolds_and_folds_back() -> None:
    message = ResponseMessage(
        content="42",
        reasoning_content="hmm",
        tool_calls=[ResponseToolCall(id="c", function=ResponseFunctionCall("f", "{}"))],
        thinking_blocks=[ThinkingBlock("hmm", "sig"), RedactedThinkingBlock("x")],
    )
    whole = [
        CompletionChoice(0, message, "tool_calls"),
        CompletionChoice(1, ResponseMessage(content="other"), "stop"),
    ]
    batch = unfolded(whole)
    assert batch[0][0].delta.role == "assistant"
    assert folded([batch]) == whole
    assert all(c.logprobs is UNSET for c in folded([batch]))


def test_logprobs_of_every_chunk_join_and_trailing_reasoning_stays() -> None:
    def token(text: str) -> Raw:
        return Raw(msgspec.json.encode({"content": [{"token": text, "logprob": -0.5}]}))

    batches = [
        [[Choice(0, Delta(content="A"), None, token("A"))]],
        [[Choice(0, Delta(content="B"), None, token("B"))]],
        [[Choice(0, Delta(), "stop", None)]],
    ]
    [choice] = folded(batches)
    assert isinstance(choice.logprobs, Raw)
    assert [t["token"] for t in msgspec.json.decode(choice.logprobs)["content"]] == ["A", "B"]
    message = ResponseMessage(
        content="x",
        reasoning_content="signed then more",
        thinking_blocks=[ThinkingBlock("signed ", "s")],
    )
    again = folded([unfolded([CompletionChoice(0, message, "stop")])])
    assert again[0].message.reasoning_content == "signed then more"
