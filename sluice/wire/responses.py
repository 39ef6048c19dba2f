"""The Responses wire model (``POST /v1/responses``): the request a client sends and the
response object and stream events the gateway answers with.

Input items and tools are decoded as flat structs whose ``type`` says which fields
apply (an easy message has no ``type``): the decoder checks each kind's fields and
names the one that is wrong (``input[3].call_id``). Content parts are a tagged union,
so an unknown part type is a 400 naming it. Fields we do not use are dropped, as
OpenAI ignores harmless unknown fields; opaque values the response echoes
(``metadata``, ``text``, ``reasoning``, ``tool_choice``, tools) are kept as
:class:`msgspec.Raw`.
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


# --- request content parts ------------------------------------------------------------


class InputText(_Wire, tag_field="type", tag="input_text"):
    text: str


class InputImage(_Wire, tag_field="type", tag="input_image"):
    image_url: str | Opt | None = UNSET
    file_id: str | Opt | None = UNSET
    detail: str | Opt | None = UNSET


class InputFile(_Wire, tag_field="type", tag="input_file"):
    file_data: str | Opt | None = UNSET
    file_id: str | Opt | None = UNSET
    file_url: str | Opt | None = UNSET
    filename: str | Opt | None = UNSET


class OutputTextPart(_Wire, tag_field="type", tag="output_text"):
    """An earlier answer's text, sent back in an assistant message."""

    text: str


class RefusalPart(_Wire, tag_field="type", tag="refusal"):
    refusal: str


ContentPart = InputText | InputImage | InputFile | OutputTextPart | RefusalPart


class SummaryPart(_Wire):
    text: str
    type: str = "summary_text"


class InputItem(_Wire, kw_only=True):
    """One ``input`` item; ``type`` absent is a message (OpenAI's easy input message)."""

    type: str = "message"
    role: Literal["user", "assistant", "system", "developer"] | Opt = UNSET
    content: str | Blocks[ContentPart] | Opt | None = UNSET
    """A message's; a reasoning item's ``null`` (as Codex sends it back) is ignored."""
    id: str | Opt | None = UNSET
    call_id: Annotated[str, Meta(min_length=1, max_length=256)] | Opt = UNSET
    name: Annotated[str, Meta(min_length=1, max_length=256)] | Opt = UNSET
    namespace: str | Opt | None = UNSET
    arguments: str | Opt = UNSET
    input: str | Opt = UNSET
    output: str | Blocks[ContentPart] | Opt = UNSET
    summary: list[SummaryPart] | Opt = UNSET
    encrypted_content: str | Opt | None = UNSET


# --- tools and the request ------------------------------------------------------------


class ToolSpec(_Wire, kw_only=True):
    """A tool: ``function``, ``custom`` (free-form text input), a ``namespace`` of those,
    or a hosted tool (``web_search`` …) the gateway's upstreams do not run."""

    type: str
    name: Annotated[str, Meta(min_length=1, max_length=128)] | Opt = UNSET
    description: str | Opt | None = UNSET
    parameters: dict[str, Any] | Opt | None = UNSET
    strict: bool | Opt | None = UNSET
    defer_loading: bool | Opt = UNSET
    tools: Annotated[list[ToolSpec], Meta(max_length=MAX_TOOLS)] | Opt = UNSET


class NamedTool(_Wire):
    type: str
    name: str | Opt = UNSET


ToolChoice = Literal["none", "auto", "required"] | NamedTool


class TextFormat(_Wire):
    type: Literal["text", "json_object", "json_schema"]
    name: str | Opt = UNSET
    schema: dict[str, Any] | Opt = UNSET
    description: str | Opt = UNSET
    strict: bool | Opt | None = UNSET


class TextConfig(_Wire):
    format: TextFormat | Opt = UNSET
    verbosity: str | Opt | None = UNSET


class ReasoningConfig(_Wire):
    effort: Annotated[str, Meta(max_length=32)] | Opt | None = UNSET
    summary: Annotated[str, Meta(max_length=32)] | Opt | None = UNSET


class ResponsesRequest(_Wire, kw_only=True):
    """``POST /v1/responses`` body; ``models`` is Sluice's request-level fallback list."""

    model: ModelName
    input: str | Annotated[list[InputItem], Meta(max_length=MAX_MESSAGES)]
    instructions: str | Opt | None = UNSET
    tools: Annotated[list[ToolSpec], Meta(max_length=MAX_TOOLS)] | Opt | None = UNSET
    tool_choice: ToolChoice | Opt | None = UNSET
    parallel_tool_calls: bool | Opt | None = UNSET
    max_output_tokens: PositiveInt | Opt | None = UNSET
    temperature: Annotated[float, Meta(ge=0, le=2)] | Opt | None = UNSET
    top_p: Probability | Opt | None = UNSET
    text: TextConfig | Opt | None = UNSET
    reasoning: ReasoningConfig | Opt | None = UNSET
    metadata: dict[Annotated[str, Meta(max_length=64)], str] | Opt | None = UNSET
    store: bool | Opt | None = UNSET
    stream: bool | Opt | None = UNSET
    background: bool | Opt | None = UNSET
    previous_response_id: str | Opt | None = UNSET
    include: Annotated[list[str], Meta(max_length=16)] | Opt | None = UNSET
    prompt_cache_key: Annotated[str, Meta(max_length=1024)] | Opt | None = UNSET
    user: Annotated[str, Meta(max_length=256)] | Opt | None = UNSET
    models: list[ModelName] | Opt = UNSET
    cache: CacheHints | Opt | None = UNSET


# --- the answer ------------------------------------------------------------------------


class InputTokensDetails(Struct):
    cached_tokens: int = 0
    cache_write_tokens: int = 0


class OutputTokensDetails(Struct):
    reasoning_tokens: int = 0


class Usage(Struct, kw_only=True):
    """The Responses counts and ours (``cost``, ``price_source``, ``credits_used``)."""

    input_tokens: int
    input_tokens_details: InputTokensDetails
    output_tokens: int
    output_tokens_details: OutputTokensDetails
    total_tokens: int
    cost: float | Opt | None = UNSET
    price_source: PriceSource | Opt | None = UNSET
    credits_used: float | Opt = UNSET


class OutputText(Struct, tag_field="type", tag="output_text"):
    text: str
    annotations: list[Raw] = []
    logprobs: list[Raw] = []


class OutMessage(Struct, tag_field="type", tag="message", kw_only=True):
    id: str
    status: str
    role: Literal["assistant"] = "assistant"
    content: list[OutputText]


class OutFunctionCall(Struct, tag_field="type", tag="function_call", kw_only=True):
    id: str
    call_id: str
    name: str
    arguments: str
    status: str
    namespace: str | Opt = UNSET


class OutCustomCall(Struct, tag_field="type", tag="custom_tool_call", kw_only=True):
    id: str
    call_id: str
    name: str
    input: str
    status: str
    namespace: str | Opt = UNSET


class OutReasoning(Struct, tag_field="type", tag="reasoning", kw_only=True):
    id: str
    summary: list[SummaryPart]
    encrypted_content: str | Opt | None = UNSET
    status: str | Opt = UNSET


OutItem = OutMessage | OutFunctionCall | OutCustomCall | OutReasoning


class ErrorInfo(Struct):
    code: str
    message: str


class IncompleteDetails(Struct):
    reason: str


class Response(Struct, kw_only=True):
    """The response object: whole, and in the stream's ``response.*`` events. Echoes
    what the request set; ``provider`` … ``route_name`` are ours (the SDKs keep them)."""

    id: str
    object: Literal["response"] = "response"
    created_at: int
    status: str
    completed_at: int | None = None
    error: ErrorInfo | None = None
    incomplete_details: IncompleteDetails | None = None
    instructions: str | None = None
    max_output_tokens: int | None = None
    model: str
    output: list[OutItem]
    parallel_tool_calls: bool = True
    previous_response_id: str | None = None
    reasoning: Raw | None = None
    store: bool = False
    background: bool = False
    temperature: float | None = None
    text: Raw | None = None
    tool_choice: Raw
    tools: Raw
    top_p: float | None = None
    truncation: str = "disabled"
    usage: Usage | None = None
    user: str | None = None
    metadata: Raw | None = None
    prompt_cache_key: str | None = None
    provider: str
    connection: str
    route: str
    route_name: str | None


class InputTokens(Struct):
    """``POST /v1/responses/input_tokens``'s answer."""

    input_tokens: int
    object: str = "response.input_tokens"
