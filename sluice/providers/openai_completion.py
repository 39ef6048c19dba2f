"""An OpenAI chat completion (the whole answer, ``stream`` off) in our terms.

A tool call without an ``id`` gets one of ours; a missing or unknown
``finish_reason`` is ``stop``, and ``tool_calls`` when the message has calls.
"""

from __future__ import annotations

import msgspec
from msgspec import UNSET

from sluice.errors import UpstreamError
from sluice.ids import IdFactory
from sluice.providers.base import ParsedCompletion
from sluice.providers.errors import malformed_response
from sluice.providers.normalize import normalize_finish_reason
from sluice.providers.openai_upstream import (
    COMPLETION,
    Message,
    openai_token_usage,
    raw_unless_null,
)
from sluice.wire.chunks import (
    CompletionChoice,
    ResponseFunctionCall,
    ResponseMessage,
    ResponseToolCall,
)


def parse_openai_completion(body: bytes, new_id: IdFactory) -> ParsedCompletion:
    try:
        completion = COMPLETION.decode(body)
    except msgspec.DecodeError:
        raise malformed_response() from None
    if not completion.choices:
        raise UpstreamError("The provider's response has no choices.", code="upstream_empty")
    choices = []
    for up in completion.choices:
        msg = up.message or Message()
        message = ResponseMessage(content=msg.content)
        reasoning = msg.reasoning_content if msg.reasoning_content is not None else msg.reasoning
        if reasoning is not None:
            message.reasoning_content = reasoning
        if msg.refusal is not None:
            message.refusal = msg.refusal
        if msg.tool_calls:
            message.tool_calls = [
                ResponseToolCall(
                    id=call.id or new_id("call"),
                    function=ResponseFunctionCall(
                        name=(call.function.name if call.function else None) or "",
                        arguments=(call.function.arguments if call.function else None) or "",
                    ),
                )
                for call in msg.tool_calls
            ]
        finish = normalize_finish_reason(up.finish_reason or "stop", bool(msg.tool_calls))
        choice = CompletionChoice(up.index, message, finish)
        logprobs = raw_unless_null(up.logprobs)
        if logprobs is not UNSET:
            choice.logprobs = logprobs
        choices.append(choice)
    usage = openai_token_usage(completion.usage) if completion.usage is not None else None
    return ParsedCompletion(choices, usage)
