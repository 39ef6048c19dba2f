"""A kept answer read whole, and a whole answer kept (docs/cache.md#whole-answers).

The cache keeps every answer as the batches a translator gives. A request for a whole
answer that hits is answered by their fold (:func:`folded`), as a provider's whole
answer would be: per choice, its text, reasoning (with the signed and redacted blocks),
refusal and tool calls joined, its finish reason and stop sequence. A whole answer
that is kept is one batch of one chunk per choice (:func:`unfolded`): a streamed
request that hits it gets each choice in one event.
"""

from __future__ import annotations

import msgspec
from msgspec import UNSET, Raw, UnsetType

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
from sluice.wire.conversation import RedactedThinkingBlock, ThinkingBlock, ThinkingBlocks

_LOGPROBS = msgspec.json.Decoder()
_ENCODER = msgspec.json.Encoder()


class _Folding:
    """One choice's deltas so far."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.texts: list[str] = []
        self.thoughts: list[str] = []
        self.unsigned: list[str] = []
        self.signed: ThinkingBlocks = []
        self.refusals: list[str] = []
        self.calls: dict[int, tuple[str, str, list[str]]] = {}
        self.logprobs: list[Raw | None] = []
        self.choice = CompletionChoice(index, ResponseMessage(content=None), None)

    def add(self, choice: Choice) -> None:
        delta = choice.delta
        if isinstance(delta.content, str):
            self.texts.append(delta.content)
        if isinstance(delta.reasoning_content, str):
            self.thoughts.append(delta.reasoning_content)
            self.unsigned.append(delta.reasoning_content)
        if isinstance(delta.reasoning_signature, str):
            self.signed.append(ThinkingBlock("".join(self.unsigned), delta.reasoning_signature))
            self.unsigned = []
        if isinstance(delta.redacted_reasoning, str):
            self.signed.append(RedactedThinkingBlock(delta.redacted_reasoning))
        if isinstance(delta.refusal, str):
            self.refusals.append(delta.refusal)
        for call in delta.tool_calls or ():
            self._call(call)
        if choice.finish_reason is not None:
            self.choice.finish_reason = choice.finish_reason
        if not isinstance(choice.logprobs, UnsetType):
            self.logprobs.append(choice.logprobs)
        if choice.stop_sequence is not UNSET:
            self.choice.stop_sequence = choice.stop_sequence

    def _call(self, call: ToolCallDelta) -> None:
        call_id, name, arguments = self.calls.get(call.index, ("", "", []))
        function = call.function
        if isinstance(function, FunctionDelta):
            name += function.name if isinstance(function.name, str) else ""
            if isinstance(function.arguments, str):
                arguments.append(function.arguments)
        self.calls[call.index] = (call.id if isinstance(call.id, str) else call_id, name, arguments)

    def done(self) -> CompletionChoice:
        message = self.choice.message
        text = "".join(self.texts)
        if text or not self.calls:
            message.content = text
        if self.thoughts:
            message.reasoning_content = "".join(self.thoughts)
        if self.signed:
            message.thinking_blocks = self.signed
        if self.refusals:
            message.refusal = "".join(self.refusals)
        if self.calls:
            message.tool_calls = [
                ResponseToolCall(id=i, function=ResponseFunctionCall(n, "".join(a)))
                for _, (i, n, a) in sorted(self.calls.items())
            ]
        if self.logprobs:
            self.choice.logprobs = _joined(self.logprobs)
        return self.choice


def _joined(pieces: list[Raw | None]) -> Raw | None:
    """Chunks' ``logprobs`` as one answer's: each list (``content``, ``refusal``) joined
    in order; None when no chunk carried any (a piece that is not an object is skipped:
    it came from the upstream)."""
    lists: dict[str, list[object]] = {}
    for piece in pieces:
        doc = None if piece is None else _LOGPROBS.decode(piece)
        for name, items in doc.items() if isinstance(doc, dict) else ():
            if isinstance(items, list):
                lists.setdefault(name, []).extend(items)
    return Raw(_ENCODER.encode(lists)) if lists else None


def folded(batches: list[ChunkBatch]) -> list[CompletionChoice]:
    """The whole answer the batches stream, choice by choice in index order."""
    choices: dict[int, _Folding] = {}
    for batch in batches:
        for chunk in batch:
            for choice in chunk:
                folding = choices.get(choice.index)
                if folding is None:
                    folding = choices[choice.index] = _Folding(choice.index)
                folding.add(choice)
    return [choices[i].done() for i in sorted(choices)]


def unfolded(choices: list[CompletionChoice]) -> ChunkBatch:
    """A whole answer as one batch: per choice, a chunk per signed or redacted block of
    reasoning, then one with all the rest."""
    return [[c] for choice in choices for c in _streamed(choice)]


def _streamed(choice: CompletionChoice) -> list[Choice]:
    message, index = choice.message, choice.index
    chunks = []
    blocks = message.thinking_blocks if isinstance(message.thinking_blocks, list) else []
    for block in blocks:
        if isinstance(block, ThinkingBlock):
            delta = Delta(reasoning_content=block.thinking, reasoning_signature=block.signature)
        else:
            delta = Delta(redacted_reasoning=block.data)
        chunks.append(Choice(index, delta, None))
    calls: list[ToolCallDelta] | UnsetType = UNSET
    if isinstance(message.tool_calls, list):
        calls = [
            ToolCallDelta(i, c.id, "function", FunctionDelta(c.function.name, c.function.arguments))
            for i, c in enumerate(message.tool_calls)
        ]
    rest = Delta(
        content=message.content,
        reasoning_content=_unsigned(message.reasoning_content, blocks),
        tool_calls=calls,
        refusal=message.refusal,
    )
    last = Choice(index, rest, choice.finish_reason, choice.logprobs)
    last.stop_sequence = choice.stop_sequence
    chunks.append(last)
    chunks[0].delta.role = "assistant"
    return chunks


def _unsigned(reasoning: str | UnsetType | None, blocks: ThinkingBlocks) -> str | UnsetType | None:
    """The reasoning after the last signed block (all of it when there is none)."""
    if not blocks or not isinstance(reasoning, str):
        return reasoning
    signed = "".join(b.thinking for b in blocks if isinstance(b, ThinkingBlock))
    rest = reasoning[len(signed) :] if reasoning.startswith(signed) else ""
    return rest or UNSET
