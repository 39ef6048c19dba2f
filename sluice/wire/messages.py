"""The Messages wire model (``POST /v1/messages``): the request a client sends, and the
message and stream events the gateway answers with.

The request is decoded strictly where a field has a meaning here (a wrong type or a
missing ``max_tokens`` is a 400 naming the field) and leniently elsewhere: fields we do
not use are dropped. Opaque values (a document's ``source``, ``cache_control``,
``citations``) are kept as :class:`msgspec.Raw` so they go on byte for byte. The answer
side carries the gateway's own fields (``provider``, ``connection``, ``route``,
``route_name``; ``cost``, ``price_source``, ``credits_used`` in usage) as extensions,
which the SDKs ignore.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from msgspec import UNSET, Meta, Raw, Struct, UnsetType

from sluice.wire.bounds import MAX_MESSAGES, MAX_TOOLS
from sluice.wire.chat import CacheHints, ModelName, PositiveInt, Probability
from sluice.wire.chunks import PriceSource
from sluice.wire.conversation import Blocks

Opt = UnsetType


class _Wire(Struct):
    """Base: absent (``UNSET``) fields are not written back."""


# --- request content blocks ----------------------------------------------------------


class TextBlock(_Wire, tag_field="type", tag="text"):
    text: str
    cache_control: Raw | Opt = UNSET
    citations: Raw | Opt = UNSET


class Base64Source(_Wire, tag_field="type", tag="base64"):
    media_type: str
    data: str


class UrlSource(_Wire, tag_field="type", tag="url"):
    url: str


class ImageBlock(_Wire, tag_field="type", tag="image"):
    source: Base64Source | UrlSource
    cache_control: Raw | Opt = UNSET


class DocumentBlock(_Wire, tag_field="type", tag="document"):
    source: Raw
    title: str | Opt | None = UNSET
    context: str | Opt | None = UNSET
    citations: Raw | Opt = UNSET
    cache_control: Raw | Opt = UNSET


class ToolUseBlock(_Wire, tag_field="type", tag="tool_use"):
    id: Annotated[str, Meta(min_length=1)]
    name: Annotated[str, Meta(min_length=1)]
    input: dict[str, Any]
    cache_control: Raw | Opt = UNSET


class ToolResultBlock(_Wire, tag_field="type", tag="tool_result"):
    tool_use_id: Annotated[str, Meta(min_length=1)]
    content: str | Blocks[TextBlock | ImageBlock] | Opt = UNSET
    is_error: bool | Opt = UNSET
    cache_control: Raw | Opt = UNSET


class ThinkingBlock(_Wire, tag_field="type", tag="thinking"):
    thinking: str
    signature: str


class RedactedThinkingBlock(_Wire, tag_field="type", tag="redacted_thinking"):
    data: str


ContentBlock = (
    TextBlock
    | ImageBlock
    | DocumentBlock
    | ToolUseBlock
    | ToolResultBlock
    | ThinkingBlock
    | RedactedThinkingBlock
)


class MessageParam(_Wire):
    """A turn; a ``system`` one (text only) stands where it was sent, after a user turn."""

    role: Literal["user", "assistant", "system"]
    content: str | Blocks[ContentBlock]
    output_config: Raw | Opt = UNSET
    """A system turn's own output settings (kept on system turns, sent on as given)."""


# --- the request ---------------------------------------------------------------------


class ToolParam(_Wire):
    """A client tool; a server tool (a ``type`` other than ``custom``) is refused."""

    name: Annotated[str, Meta(min_length=1, max_length=128)]
    input_schema: dict[str, Any] | Opt = UNSET
    description: str | Opt = UNSET
    type: str | Opt | None = UNSET
    cache_control: Raw | Opt = UNSET
    defer_loading: bool | Opt = UNSET


class ToolChoiceParam(_Wire):
    type: Literal["auto", "any", "tool", "none"]
    name: str | Opt = UNSET
    disable_parallel_tool_use: bool | Opt = UNSET


class ThinkingParam(_Wire):
    """``adaptive``: the model decides how much to think (``output_config.effort`` guides
    it); ``display`` says how thinking is returned (sent on as given)."""

    type: Literal["enabled", "disabled", "adaptive"]
    budget_tokens: Annotated[int, Meta(ge=1024, le=100_000_000)] | Opt = UNSET
    display: Annotated[str, Meta(max_length=64)] | Opt = UNSET


class OutputFormatParam(_Wire):
    type: str
    schema: dict[str, Any] | Opt = UNSET


class OutputConfigParam(_Wire):
    """``output_config``: the effort (``low`` … ``max``) and a structured-output format."""

    effort: Annotated[str, Meta(max_length=32)] | Opt | None = UNSET
    format: OutputFormatParam | Opt | None = UNSET


class MetadataParam(_Wire):
    user_id: Annotated[str, Meta(max_length=256)] | Opt | None = UNSET


class CountTokensRequest(_Wire, kw_only=True):
    """``POST /v1/messages/count_tokens`` body: what a request's prompt is made of."""

    model: ModelName
    messages: Annotated[list[MessageParam], Meta(min_length=1, max_length=MAX_MESSAGES)]
    system: str | Blocks[TextBlock] | Opt = UNSET
    tools: Annotated[list[ToolParam], Meta(max_length=MAX_TOOLS)] | Opt = UNSET
    tool_choice: ToolChoiceParam | Opt = UNSET
    thinking: ThinkingParam | Opt = UNSET


class MessagesRequest(CountTokensRequest, kw_only=True):
    """``POST /v1/messages`` body; ``models`` is Sluice's request-level fallback list."""

    max_tokens: PositiveInt
    stop_sequences: Annotated[list[str], Meta(max_length=16)] | Opt = UNSET
    temperature: Probability | Opt = UNSET
    top_p: Probability | Opt = UNSET
    top_k: PositiveInt | Opt = UNSET
    metadata: MetadataParam | Opt = UNSET
    stream: bool | Opt = UNSET
    output_config: OutputConfigParam | Opt = UNSET
    models: list[ModelName] | Opt = UNSET
    cache: CacheHints | Opt | None = UNSET


WIRE = "messages"
"""The wire's name where a request keeps fields of it (``ChatRequest.native``)."""
MODELLED_FIELDS = frozenset(
    {"model", "messages", "system", "max_tokens", "stop_sequences", "temperature", "top_p"}
    | {"top_k", "metadata", "stream", "tools", "tool_choice", "models", "cache"}
)
"""Top-level fields the internal request carries; every other one the client sent is
kept as it came for an upstream that speaks this wire."""


# --- the answer ----------------------------------------------------------------------


class Usage(Struct, kw_only=True):
    """Anthropic's counts (``input_tokens`` excludes both cache kinds) and ours."""

    input_tokens: int
    cache_creation_input_tokens: int
    cache_read_input_tokens: int
    output_tokens: int
    cost: float | Opt | None = UNSET
    price_source: PriceSource | Opt | None = UNSET
    credits_used: float | Opt = UNSET


class OutText(Struct, tag_field="type", tag="text"):
    text: str


class OutThinking(Struct, tag_field="type", tag="thinking"):
    thinking: str
    signature: str


class OutRedactedThinking(Struct, tag_field="type", tag="redacted_thinking"):
    data: str


class OutToolUse(Struct, tag_field="type", tag="tool_use"):
    id: str
    name: str
    input: Raw


OutBlock = OutText | OutThinking | OutRedactedThinking | OutToolUse


class Message(Struct, kw_only=True):
    """A whole answer (and, with empty ``content``, the head of a stream)."""

    id: str
    type: Literal["message"] = "message"
    role: Literal["assistant"] = "assistant"
    model: str
    content: list[OutBlock]
    stop_reason: str | None
    stop_sequence: str | None
    usage: Usage
    provider: str
    connection: str
    route: str
    route_name: str | None


class MessageStart(Struct, tag_field="type", tag="message_start"):
    message: Message


class MessageDeltaBody(Struct):
    stop_reason: str | None
    stop_sequence: str | None


class MessageDelta(Struct, tag_field="type", tag="message_delta"):
    delta: MessageDeltaBody
    usage: Usage


class ErrorDetails(Struct):
    error_code: str


class ErrorObject(Struct):
    """``code`` and ``param`` are ours (the error tree's), beside Anthropic's two; the
    code is also in ``details.error_code``, where the anthropic SDKs read one."""

    type: str
    message: str
    code: str | None = None
    param: str | None = None
    details: ErrorDetails | Opt = UNSET


class ErrorEvent(Struct, tag_field="type", tag="error"):
    error: ErrorObject
    usage: Usage | Opt = UNSET
    """The partial usage of a stream that failed after it started (ours)."""


class CountTokens(Struct):
    """``POST /v1/messages/count_tokens``'s answer; ``source`` (ours) says who counted:
    ``provider`` (the upstream's own count) or ``estimate``."""

    input_tokens: int
    source: Literal["provider", "estimate"]
