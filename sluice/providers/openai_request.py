"""Our chat request → the body an OpenAI-compatible upstream takes; the URL and headers
every call to such an upstream shares (chat, embeddings).

Our request is the OpenAI wire already; what this removes is ours: the top-level
extensions (``models``, ``top_k``, ``reasoning_budget``, ``betas``, ``native``), and in
messages the signed thinking blocks, ``is_error`` and ``cache_control`` of tool results
and calls, ``cache_control`` and ``defer_loading`` of tools, a system turn's
``output_config`` (an OpenAI-compatible server that sees an unknown field may answer
400). A failed tool's result is marked in its text. Document parts and images in tool
results have no equivalent and are refused by name. A request that carries none of
these is sent as it came, field for field. A connection's ``allow_extra_fields`` keeps
the extensions it names (``top_k`` for vLLM) and adds, as sent, the request's fields
outside the chat wire it names (``min_p``, ``chat_template_kwargs``).
"""

from __future__ import annotations

import msgspec
from msgspec import UNSET, UnsetType

from sluice.core.connection import ConnectionSettings
from sluice.providers.request_parts import refuse_document, tool_result_text
from sluice.wire.chat import (
    CHAT_WIRE,
    EXTENSION_FIELDS,
    ChatRequest,
    NativeFields,
    StreamOptions,
    Tool,
)
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
_NO_EXTENSIONS = dict.fromkeys(EXTENSION_FIELDS, UNSET)
_ENCODER = msgspec.json.Encoder()


def openai_url(conn: ConnectionSettings, path: str) -> str:
    """``path`` (``/chat/completions``, ``/embeddings``) under the connection's base URL."""
    return conn.base_url.rstrip("/") + path


def openai_headers(conn: ConnectionSettings) -> dict[str, str]:
    """A JSON body's headers, with the connection's key as a bearer token if it has one."""
    headers = {"content-type": "application/json"}
    if conn.api_key is not None:
        headers["authorization"] = "Bearer " + conn.api_key.reveal()
    return headers


def openai_body(
    req: ChatRequest, native_model: str, allowed: frozenset[str] = frozenset()
) -> ChatRequest | msgspec.Raw:
    """The upstream body; ``allowed``: the connection's ``allow_extra_fields`` (with
    fields outside the chat wire to add, the body comes encoded, as ``Raw``)."""
    body = msgspec.structs.replace(
        req,
        model=native_model,
        messages=[_message(i, m) for i, m in enumerate(req.messages)],
        tools=[_tool(t) for t in req.tools] if isinstance(req.tools, list) else req.tools,
        stream=True if req.is_stream else UNSET,
        stream_options=StreamOptions(include_usage=True) if req.is_stream else UNSET,
        **(_extensions_dropped(allowed) if allowed else _NO_EXTENSIONS),
    )
    native = req.native
    if not allowed or not isinstance(native, NativeFields) or native.wire != CHAT_WIRE:
        return body
    extra = {name: value for name, value in native.fields.items() if name in allowed}
    if not extra:
        return body
    return msgspec.Raw(_ENCODER.encode(body)[:-1] + b"," + _ENCODER.encode(extra)[1:])


def _extensions_dropped(allowed: frozenset[str]) -> dict[str, UnsetType]:
    """Our extensions the connection does not take (``native`` is never sent as such)."""
    return {n: UNSET for n in EXTENSION_FIELDS if n not in allowed or n == "native"}


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
