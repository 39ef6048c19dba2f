"""Anthropic's Messages request format, encode only (what :mod:`.request` builds): the
request around the content blocks, which are the Messages wire's own."""

from __future__ import annotations

from typing import Any

from msgspec import UNSET, Raw, Struct, UnsetType

from sluice.wire.messages import MessageParam, TextBlock


class ToolParam(Struct):
    name: str
    input_schema: dict[str, Any]
    description: str | UnsetType = UNSET
    strict: bool | UnsetType = UNSET
    cache_control: Raw | UnsetType = UNSET
    defer_loading: bool | UnsetType = UNSET


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
