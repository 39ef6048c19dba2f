"""The shapes of a Converse request body (encode only).

Converse content blocks and choices are unions keyed by their one member
(``{"text": …}``, ``{"toolUse": …}``, ``{"auto": {}}``), so each variant is its own
struct with that single field. Blobs (image bytes) are base64 text in JSON.
"""

from __future__ import annotations

from typing import Any

from msgspec import UNSET, Struct, UnsetType


class Empty(Struct):
    pass


class Text(Struct):
    text: str


class CachePoint(Struct):
    type: str = "default"


class CacheBlock(Struct, rename="camel"):
    cache_point: CachePoint


class ImageSource(Struct):
    bytes: str  # base64, as JSON carries blobs


class Image(Struct):
    format: str
    source: ImageSource


class ImageBlock(Struct):
    image: Image


class ToolUse(Struct, rename="camel"):
    tool_use_id: str
    name: str
    input: Any


class ToolUseBlock(Struct, rename="camel"):
    tool_use: ToolUse


class Json(Struct):
    json: Any


class ToolResult(Struct, rename="camel"):
    tool_use_id: str
    content: list[Text | Json]


class ToolResultBlock(Struct, rename="camel"):
    tool_result: ToolResult


class ReasoningText(Struct):
    text: str
    signature: str


class Reasoning(Struct, rename="camel"):
    """Signed reasoning, or reasoning the model returned encrypted (base64)."""

    reasoning_text: ReasoningText | UnsetType = UNSET
    redacted_content: str | UnsetType = UNSET


class ReasoningBlock(Struct, rename="camel"):
    reasoning_content: Reasoning


Block = Text | CacheBlock | ImageBlock | ReasoningBlock | ToolUseBlock | ToolResultBlock


class Message(Struct):
    role: str
    content: list[Block]


class InferenceConfig(Struct, rename="camel"):
    max_tokens: int | UnsetType = UNSET
    temperature: float | UnsetType = UNSET
    top_p: float | UnsetType = UNSET
    stop_sequences: list[str] | UnsetType = UNSET


class Schema(Struct):
    json: Any


class ToolSpec(Struct, rename="camel"):
    name: str
    input_schema: Schema
    description: str | UnsetType = UNSET


class Tool(Struct, rename="camel"):
    tool_spec: ToolSpec


class NamedTool(Struct):
    name: str


class AutoChoice(Struct):
    auto: Empty


class AnyChoice(Struct):
    any: Empty


class SpecificChoice(Struct):
    tool: NamedTool


class ToolConfig(Struct, rename="camel"):
    tools: list[Tool]
    tool_choice: AutoChoice | AnyChoice | SpecificChoice | UnsetType = UNSET


class JsonSchema(Struct):
    """``JsonSchemaDefinition``: only the schema is required."""

    schema: str  # the schema as a JSON string
    name: str | UnsetType = UNSET
    description: str | UnsetType = UNSET


class FormatStructure(Struct, rename="camel"):
    """A union; ``jsonSchema`` is its one member."""

    json_schema: JsonSchema


class TextFormat(Struct, tag_field="type", tag="json_schema"):
    """``OutputFormat``: ``json_schema`` is the one type Converse defines."""

    structure: FormatStructure


class OutputConfig(Struct, rename="camel"):
    text_format: TextFormat


class ConverseBody(Struct, rename="camel"):
    messages: list[Message]
    system: list[Text | CacheBlock] | UnsetType = UNSET
    inference_config: InferenceConfig | UnsetType = UNSET
    tool_config: ToolConfig | UnsetType = UNSET
    additional_model_request_fields: dict[str, Any] | UnsetType = UNSET
    output_config: OutputConfig | UnsetType = UNSET
