"""The response side of the wire model: stream chunks, completions, usage (docs/api.md#the-stream).

Translators produce :class:`Choice` lists; the gateway stamps them with the stream's
identity (id, served model, provider, connection, route) when it encodes them, see
:class:`sluice.wire.encode.ChunkEncoder`. :class:`ChatCompletionChunk` is the full
chunk as a client decodes it.
"""

from __future__ import annotations

from typing import Literal

from msgspec import UNSET, Raw, Struct, UnsetType

from sluice.wire.conversation import ThinkingBlocks

FinishReason = Literal["stop", "length", "tool_calls", "content_filter"]
FINISH_REASONS: frozenset[str] = frozenset({"stop", "length", "tool_calls", "content_filter"})
PriceSource = Literal["list", "custom", "custom_provider", "provider", "cache"]


class FunctionDelta(Struct, gc=False):
    name: str | UnsetType = UNSET
    arguments: str | UnsetType = UNSET


class ToolCallDelta(Struct):
    index: int
    id: str | UnsetType = UNSET
    type: Literal["function"] | UnsetType = UNSET
    function: FunctionDelta | UnsetType = UNSET


class Delta(Struct):
    """``reasoning_signature`` (the signature that closes the reasoning so far) and
    ``redacted_reasoning`` (reasoning the provider sent encrypted) are Sluice extensions:
    what a later turn must send back in ``thinking_blocks``."""

    role: Literal["assistant"] | UnsetType = UNSET
    content: str | UnsetType | None = UNSET
    reasoning_content: str | UnsetType | None = UNSET
    tool_calls: list[ToolCallDelta] | UnsetType | None = UNSET
    refusal: str | UnsetType | None = UNSET
    reasoning_signature: str | UnsetType = UNSET
    redacted_reasoning: str | UnsetType = UNSET


def text_only(delta: Delta) -> bool:
    """A delta that only carries more text (the hot path's common case)."""
    return (
        isinstance(delta.content, str)
        and bool(delta.content)
        and delta.reasoning_content is UNSET
        and delta.tool_calls is UNSET
        and delta.refusal is UNSET
        and delta.reasoning_signature is UNSET
        and delta.redacted_reasoning is UNSET
    )


class Choice(Struct):
    """One choice of a stream chunk. ``finish_reason`` is always written (null or set);
    ``stop_sequence`` (ours) says which stop sequence ended it, where the provider says."""

    index: int
    delta: Delta
    finish_reason: str | None
    logprobs: Raw | UnsetType | None = UNSET
    stop_sequence: str | UnsetType = UNSET


class PromptTokensDetails(Struct):
    cached_tokens: int = 0


class CompletionTokensDetails(Struct):
    reasoning_tokens: int = 0


class Usage(Struct):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: PromptTokensDetails
    completion_tokens_details: CompletionTokensDetails
    cost: float | None = None
    price_source: PriceSource | None = None


class ChatCompletionChunk(Struct, kw_only=True):
    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int
    model: str
    provider: str
    connection: str
    route: str
    route_name: str | None
    choices: list[Choice]
    usage: Usage | UnsetType = UNSET
    credits_used: float | UnsetType = UNSET


# --- non-streaming -------------------------------------------------------------------


class ResponseFunctionCall(Struct):
    name: str
    arguments: str


class ResponseToolCall(Struct, kw_only=True):
    id: str
    type: Literal["function"] = "function"
    function: ResponseFunctionCall


class ResponseMessage(Struct, kw_only=True):
    """``thinking_blocks`` (ours): the reasoning as the provider signed it, to send back."""

    role: Literal["assistant"] = "assistant"
    content: str | None
    reasoning_content: str | UnsetType = UNSET
    tool_calls: list[ResponseToolCall] | UnsetType = UNSET
    refusal: str | UnsetType | None = UNSET
    thinking_blocks: ThinkingBlocks | UnsetType = UNSET


class CompletionChoice(Struct):
    index: int
    message: ResponseMessage
    finish_reason: str | None
    logprobs: Raw | UnsetType | None = UNSET
    stop_sequence: str | UnsetType = UNSET


class ChatCompletion(Struct, kw_only=True):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    provider: str
    connection: str
    route: str
    route_name: str | None
    choices: list[CompletionChoice]
    usage: Usage
    credits_used: float | UnsetType = UNSET


class ModelPricing(Struct):
    """USD per million tokens."""

    input: float
    output: float
    cache_read: float | UnsetType = UNSET
    cache_write: float | UnsetType = UNSET


class ModelCapabilities(Struct, frozen=True, omit_defaults=True, forbid_unknown_fields=True):
    """What a model can do, as the catalog declares it (``[[models]] capabilities``);
    an ability left out is unknown, and a request needing it is tried. A model that
    declares ``embeddings = true`` and leaves ``chat`` out is not a chat model."""

    chat: bool | None = None
    """Chat completions (and the Messages and Responses doors over them)."""
    tools: bool | None = None
    """Function tools."""
    vision: bool | None = None
    """Image parts in messages."""
    json_schema: bool | None = None
    """``response_format`` with a JSON schema."""
    reasoning: bool | None = None
    """Reasoning effort or a thinking budget."""
    embeddings: bool | None = None
    """``POST /v1/embeddings``."""

    def lacks(self) -> frozenset[str]:
        """The abilities declared false (worked out once, when the catalog is built)."""
        lacking = {name for name in self.__struct_fields__ if getattr(self, name) is False}
        if self.chat is None and self.embeddings is True:
            lacking.add("chat")  # an embeddings model is no chat model unless it says so
        return frozenset(lacking)


class ModelEntry(Struct, kw_only=True):
    """One entry of ``GET /v1/models``, and the answer of ``GET /v1/models/{id}``."""

    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str
    pricing: ModelPricing | None
    context_window: int | UnsetType = UNSET
    max_output_tokens: int | UnsetType = UNSET
    dimensions: int | UnsetType = UNSET
    """An embeddings model's vector length when none is asked for."""
    capabilities: ModelCapabilities | UnsetType = UNSET


class ModelList(Struct, kw_only=True):
    object: Literal["list"] = "list"
    data: list[ModelEntry]


def tool_calls_of(delta: Delta) -> list[ToolCallDelta]:
    calls = delta.tool_calls
    return calls if isinstance(calls, list) else []
