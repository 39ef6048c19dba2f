"""Anthropic's Messages request format, encode only (what :mod:`.request` builds)."""

from __future__ import annotations

from typing import Any

from msgspec import UNSET, Raw, Struct, UnsetType


class TextBlock(Struct, tag_field="type", tag="text"):
    text: str
    cache_control: Raw | UnsetType = UNSET


class Base64Source(Struct, tag_field="type", tag="base64"):
    media_type: str
    data: str


class UrlSource(Struct, tag_field="type", tag="url"):
    url: str


class ImageBlock(Struct, tag_field="type", tag="image"):
    source: Base64Source | UrlSource
    cache_control: Raw | UnsetType = UNSET


class DocumentBlock(Struct, tag_field="type", tag="document"):
    source: Raw
    title: str | UnsetType | None = UNSET
    context: str | UnsetType | None = UNSET
    citations: Raw | UnsetType = UNSET
    cache_control: Raw | UnsetType = UNSET


class ThinkingBlock(Struct, tag_field="type", tag="thinking"):
    thinking: str
    signature: str


class RedactedThinkingBlock(Struct, tag_field="type", tag="redacted_thinking"):
    data: str


class ToolUseBlock(Struct, tag_field="type", tag="tool_use"):
    id: str
    name: str
    input: dict[str, Any]
    cache_control: Raw | UnsetType = UNSET


class ToolResultBlock(Struct, tag_field="type", tag="tool_result"):
    tool_use_id: str
    content: str | list[TextBlock | ImageBlock] | UnsetType = UNSET
    is_error: bool | UnsetType = UNSET
    cache_control: Raw | UnsetType = UNSET


Block = (
    TextBlock
    | ImageBlock
    | DocumentBlock
    | ThinkingBlock
    | RedactedThinkingBlock
    | ToolUseBlock
    | ToolResultBlock
)


class MessageParam(Struct):
    role: str
    content: str | list[Block]


class ToolParam(Struct):
    name: str
    input_schema: dict[str, Any]
    description: str | UnsetType = UNSET
    strict: bool | UnsetType = UNSET
    cache_control: Raw | UnsetType = UNSET


class ToolChoiceParam(Struct):
    type: str
    name: str | UnsetType = UNSET
    disable_parallel_tool_use: bool | UnsetType = UNSET


class ThinkingParam(Struct, tag_field="type", tag="enabled"):
    budget_tokens: int


class OutputFormat(Struct, tag_field="type", tag="json_schema"):
    schema: dict[str, Any]


class OutputConfig(Struct):
    format: OutputFormat


class Metadata(Struct):
    user_id: str


class CountTokensRequest(Struct):
    model: str
    messages: list[MessageParam]
    system: str | list[TextBlock] | UnsetType = UNSET
    tools: list[ToolParam] | UnsetType = UNSET
    tool_choice: ToolChoiceParam | UnsetType = UNSET
    thinking: ThinkingParam | UnsetType = UNSET


class CountTokensAnswer(Struct):
    input_tokens: int


class MessagesRequest(Struct):
    model: str
    max_tokens: int
    messages: list[MessageParam]
    system: str | list[TextBlock] | UnsetType = UNSET
    stop_sequences: list[str] | UnsetType = UNSET
    temperature: float | UnsetType = UNSET
    top_p: float | UnsetType = UNSET
    top_k: int | UnsetType = UNSET
    tools: list[ToolParam] | UnsetType = UNSET
    tool_choice: ToolChoiceParam | UnsetType = UNSET
    thinking: ThinkingParam | UnsetType = UNSET
    output_config: OutputConfig | UnsetType = UNSET
    metadata: Metadata | UnsetType = UNSET
    stream: bool | UnsetType = UNSET
