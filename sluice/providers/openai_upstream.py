"""OpenAI's chat-completion response format (decode only), and what it means in our terms.

One permissive struct per shape, read by the stream translator
(:mod:`.openai_stream`) and the whole-answer parser (:mod:`.openai_completion`); fields
we do not use are skipped. Differences between the servers that speak it, read here:
``reasoning`` or ``reasoning_content`` (both mean the same), DeepSeek's
``prompt_cache_hit_tokens``, tool calls without ``index`` or ``id``, a reported
``cost``.
"""

from __future__ import annotations

import msgspec
from msgspec import UNSET, Raw, Struct, UnsetType

from sluice.core.usage import TokenUsage


class Function(Struct):
    name: str | None = None
    arguments: str | None = None


class StreamToolCall(Struct):
    index: int | None = None
    id: str | None = None
    function: Function | None = None


class StreamDelta(Struct):
    content: str | None = None
    reasoning_content: str | None = None
    reasoning: str | None = None
    tool_calls: list[StreamToolCall] | None = None
    refusal: str | None = None


class StreamChoice(Struct):
    index: int = 0
    delta: StreamDelta | None = None
    finish_reason: str | None = None
    logprobs: Raw | UnsetType = UNSET  # (msgspec: a Raw in a union with None only takes null)


class PromptDetails(Struct):
    cached_tokens: int | None = None
    cache_write_tokens: int | None = None


class CompletionDetails(Struct):
    reasoning_tokens: int | None = None


class Usage(Struct):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    prompt_tokens_details: PromptDetails | None = None
    completion_tokens_details: CompletionDetails | None = None
    prompt_cache_hit_tokens: int | None = None  # DeepSeek
    cost: float | None = None  # gateways and routers that price for us


class ErrorDetail(Struct):
    message: str | None = None
    type: str | None = None
    code: str | int | None = None
    param: str | None = None


class StreamChunk(Struct):
    choices: list[StreamChoice] | None = None
    usage: Usage | None = None
    error: ErrorDetail | str | None = None


class MessageToolCall(Struct):
    id: str | None = None
    function: Function | None = None


class Message(Struct):
    content: str | None = None
    reasoning_content: str | None = None
    reasoning: str | None = None
    tool_calls: list[MessageToolCall] | None = None
    refusal: str | None = None


class MessageChoice(Struct):
    index: int = 0
    message: Message | None = None
    finish_reason: str | None = None
    logprobs: Raw | UnsetType = UNSET  # (msgspec: a Raw in a union with None only takes null)


class Completion(Struct):
    choices: list[MessageChoice] = []
    usage: Usage | None = None


STREAM_CHUNK = msgspec.json.Decoder(StreamChunk)
COMPLETION = msgspec.json.Decoder(Completion)


def raw_unless_null(raw: Raw | UnsetType) -> Raw | UnsetType:
    """A raw JSON value, or UNSET when it is absent or ``null``."""
    return UNSET if raw is UNSET or bytes(raw) == b"null" else raw


def openai_token_usage(usage: Usage) -> TokenUsage:
    cached = 0
    written = 0
    details = usage.prompt_tokens_details
    if details is not None:
        cached = details.cached_tokens or 0
        written = details.cache_write_tokens or 0
    if usage.prompt_cache_hit_tokens is not None:
        cached = usage.prompt_cache_hit_tokens
    reasoning = 0
    if usage.completion_tokens_details is not None:
        reasoning = usage.completion_tokens_details.reasoning_tokens or 0
    return TokenUsage(
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        cached_tokens=cached,
        cache_write_tokens=written,
        reasoning_tokens=reasoning,
        provider_cost=usage.cost,
    )
