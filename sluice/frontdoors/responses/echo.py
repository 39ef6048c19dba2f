"""What a response repeats of its request (``instructions``, ``tools``, ``metadata`` …),
read from the fields the decoder kept as sent (``ChatRequest.native``)."""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import Raw

from sluice.frontdoors.responses.tools import ToolNames
from sluice.wire.chat import ChatRequest, NativeFields

_VALUE = msgspec.json.Decoder()
_AUTO = Raw(b'"auto"')
_NONE = Raw(b"[]")


class Echo:
    __slots__ = (
        "background",
        "instructions",
        "max_output_tokens",
        "metadata",
        "names",
        "parallel_tool_calls",
        "previous_response_id",
        "prompt_cache_key",
        "reasoning",
        "store",
        "temperature",
        "text",
        "tool_choice",
        "tools",
        "top_p",
        "user",
    )

    def __init__(self, req: ChatRequest) -> None:
        native = req.native
        fields = native.fields if isinstance(native, NativeFields) else {}
        self.instructions = _typed(fields, "instructions", str)
        self.max_output_tokens = _typed(fields, "max_output_tokens", int)
        self.temperature = _typed(fields, "temperature", float)
        self.top_p = _typed(fields, "top_p", float)
        self.user = _typed(fields, "user", str)
        self.prompt_cache_key = _typed(fields, "prompt_cache_key", str)
        self.previous_response_id = _typed(fields, "previous_response_id", str)
        self.parallel_tool_calls = _typed(fields, "parallel_tool_calls", bool) is not False
        self.store = _typed(fields, "store", bool) is not False
        self.background = _typed(fields, "background", bool) is True
        self.reasoning = fields.get("reasoning")
        self.text = fields.get("text")
        self.metadata = fields.get("metadata")
        self.tool_choice = _given(fields.get("tool_choice")) or _AUTO
        self.tools = _given(fields.get("tools")) or _NONE
        self.names = ToolNames(_given(fields.get("tools")))


def _given(raw: Raw | None) -> Raw | None:
    return None if raw is None or bytes(raw) == b"null" else raw


def _typed(fields: dict[str, Raw], name: str, kind: type[Any]) -> Any:
    raw = fields.get(name)
    if raw is None:
        return None
    value = _VALUE.decode(raw)
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return (
        value if isinstance(value, kind) and not (kind is int and isinstance(value, bool)) else None
    )
