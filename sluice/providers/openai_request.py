"""Our chat request → the body an OpenAI-compatible upstream takes.

Our request is the OpenAI wire already; what this removes is ours: the top-level
extensions (``models``, ``top_k``, ``reasoning_budget``, ``betas``, ``native``), and in
messages the signed thinking blocks, ``is_error`` and ``cache_control`` of tool results
and calls, ``cache_control`` and ``defer_loading`` of tools, a system turn's
``output_config`` (an OpenAI-compatible server that sees an unknown field may answer
400). A failed tool's result is marked in its text. Document parts and images in tool
results have no equivalent and are refused by name. A request that carries none of
these is sent as it came, field for field.
"""

from __future__ import annotations

import msgspec
from msgspec import UNSET

from sluice.providers.request_parts import refuse_document, tool_result_text
from sluice.wire.chat import EXTENSION_FIELDS, ChatRequest, StreamOptions, Tool
from sluice.wire.conversation import (
    AssistantMessage,
    DocumentPart,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)

FAILED_TOOL_PREFIX = "Error: "
"""What a failed tool's result text starts with (``is_error`` has no field here)."""


def openai_body(req: ChatRequest, native_model: str) -> ChatRequest:
    return msgspec.structs.replace(
        req,
        model=native_model,
        messages=[_message(i, m) for i, m in enumerate(req.messages)],
        tools=[_tool(t) for t in req.tools] if isinstance(req.tools, list) else req.tools,
        stream=True if req.is_stream else UNSET,
        stream_options=StreamOptions(include_usage=True) if req.is_stream else UNSET,
        **dict.fromkeys(EXTENSION_FIELDS, UNSET),
    )


def _message(i: int, message: Message) -> Message:
    if isinstance(message, SystemMessage) and message.output_config is not UNSET:
        return msgspec.structs.replace(message, output_config=UNSET)
    if isinstance(message, UserMessage) and isinstance(message.content, list):
        for j, part in enumerate(message.content):
            if isinstance(part, DocumentPart):
                refuse_document(part, f"messages[{i}].content[{j}]")
    elif isinstance(message, AssistantMessage):
        if message.thinking_blocks is not UNSET or _marked_calls(message):
            calls = message.tool_calls
            return msgspec.structs.replace(
                message,
                thinking_blocks=UNSET,
                tool_calls=[_call(c) for c in calls] if isinstance(calls, list) else calls,
            )
    elif isinstance(message, ToolMessage):
        if message.is_error is not UNSET or message.cache_control is not UNSET:
            text = tool_result_text(message.content, f"messages[{i}]")
            if message.is_error is True:
                text = FAILED_TOOL_PREFIX + text
            return ToolMessage(text, message.tool_call_id)
        if isinstance(message.content, list):
            tool_result_text(message.content, f"messages[{i}]")  # images are refused
    return message


def _marked_calls(message: AssistantMessage) -> bool:
    calls = message.tool_calls
    return isinstance(calls, list) and any(c.cache_control is not UNSET for c in calls)


def _call(call: ToolCall) -> ToolCall:
    return msgspec.structs.replace(call, cache_control=UNSET)


def _tool(tool: Tool) -> Tool:
    if tool.cache_control is UNSET and tool.defer_loading is UNSET:
        return tool
    return msgspec.structs.replace(tool, cache_control=UNSET, defer_loading=UNSET)
