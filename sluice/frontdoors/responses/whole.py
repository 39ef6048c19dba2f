"""A whole answer → a response object: its reasoning (signed thinking sealed), its
text, its tool calls, in that order."""

from __future__ import annotations

import msgspec

from sluice.core.tally import Tally
from sluice.frontdoors.responses.echo import Echo
from sluice.frontdoors.responses.objects import (
    WallClock,
    call_item,
    completed_at,
    response_id,
    response_object,
    settle,
)
from sluice.frontdoors.responses.reasoning import Seal
from sluice.wire.chunks import CompletionChoice
from sluice.wire.encode import StreamIdentity
from sluice.wire.responses import OutItem, OutMessage, OutputText, OutReasoning, SummaryPart

_ENCODER = msgspec.json.Encoder()


def response_body(
    identity: StreamIdentity,
    echo: Echo,
    choice: CompletionChoice,
    tally: Tally,
    *,
    seal: Seal | None = None,
    clock: WallClock | None = None,
) -> bytes:
    """A whole answer: its reasoning (its signed thinking sealed), its text, its tool
    calls, in that order."""
    message = choice.message
    suffix = response_id(identity).partition("_")[2]
    output: list[OutItem] = []
    reasoning = message.reasoning_content
    blocks = message.thinking_blocks if seal is not None else None
    if (isinstance(reasoning, str) and reasoning) or blocks:
        summary = [SummaryPart(reasoning)] if isinstance(reasoning, str) and reasoning else []
        thought = OutReasoning(id=f"rs_{suffix}_0", summary=summary)
        if blocks and seal is not None:
            thought.encrypted_content = seal(blocks)
        output.append(thought)
    texts = [t for t in (message.content, message.refusal) if isinstance(t, str) and t]
    if texts:
        part = OutputText("".join(texts))
        output.append(
            OutMessage(id=f"msg_{suffix}_{len(output)}", status="completed", content=[part])
        )
    for call in message.tool_calls or ():
        fn, item_id = call.function, f"fc_{suffix}_{len(output)}"
        output.append(call_item(echo, item_id, call.id, fn.name, fn.arguments, status="completed"))
    response = response_object(identity, echo, "completed", output)
    settle(response, choice.finish_reason, tally, completed_at(clock, identity))
    return _ENCODER.encode(response)
