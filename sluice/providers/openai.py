"""OpenAI Chat Completions, and every server that speaks it (DeepSeek, vLLM, Ollama, …).

The upstream stream is parsed and re-emitted through :class:`ChunkEmitter`, never
forwarded as bytes. Differences between servers handled here: ``reasoning`` or
``reasoning_content`` deltas (both become ``reasoning_content``), DeepSeek's
``prompt_cache_hit_tokens``, tool calls without ``index`` or ``id``, a final delta
that carries content and ``finish_reason`` together, a reported ``cost``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec
from msgspec import UNSET, Raw, Struct, UnsetType

from sluice.core.connection import Target
from sluice.core.usage import TokenUsage
from sluice.errors import ApiError, UpstreamError
from sluice.ids import IdFactory
from sluice.providers.base import (
    DEFAULT_SHAPE,
    AdapterBase,
    ParsedCompletion,
    StreamShape,
    UpstreamRequest,
)
from sluice.providers.errors import error_for_status, malformed_response, retry_after_seconds
from sluice.providers.normalize import normalize_finish_reason
from sluice.providers.openai_request import openai_body
from sluice.providers.sse_stream import SSEStreamTranslator
from sluice.providers.stream_base import malformed_event
from sluice.wire.chat import ChatRequest
from sluice.wire.chunks import (
    CompletionChoice,
    Delta,
    FunctionDelta,
    ResponseFunctionCall,
    ResponseMessage,
    ResponseToolCall,
    ToolCallDelta,
)
from sluice.wire.sse import ServerSentEvent

# --- the upstream's wire format (decode only) ------------------------------------------


class _Function(Struct):
    name: str | None = None
    arguments: str | None = None


class _ToolCall(Struct):
    index: int | None = None
    id: str | None = None
    function: _Function | None = None


class _Delta(Struct):
    content: str | None = None
    reasoning_content: str | None = None
    reasoning: str | None = None
    tool_calls: list[_ToolCall] | None = None
    refusal: str | None = None


class _StreamChoice(Struct):
    index: int = 0
    delta: _Delta | None = None
    finish_reason: str | None = None
    logprobs: Raw | UnsetType = UNSET  # (msgspec: a Raw in a union with None only takes null)


class _PromptDetails(Struct):
    cached_tokens: int | None = None
    cache_write_tokens: int | None = None


class _CompletionDetails(Struct):
    reasoning_tokens: int | None = None


class _Usage(Struct):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    prompt_tokens_details: _PromptDetails | None = None
    completion_tokens_details: _CompletionDetails | None = None
    prompt_cache_hit_tokens: int | None = None  # DeepSeek
    cost: float | None = None  # gateways and routers that price for us


class _ErrorDetail(Struct):
    message: str | None = None
    type: str | None = None
    code: str | int | None = None
    param: str | None = None


class _StreamChunk(Struct):
    choices: list[_StreamChoice] | None = None
    usage: _Usage | None = None
    error: _ErrorDetail | str | None = None


class _MessageToolCall(Struct):
    id: str | None = None
    function: _Function | None = None


class _Message(Struct):
    content: str | None = None
    reasoning_content: str | None = None
    reasoning: str | None = None
    tool_calls: list[_MessageToolCall] | None = None
    refusal: str | None = None


class _CompletionChoice(Struct):
    index: int = 0
    message: _Message | None = None
    finish_reason: str | None = None
    logprobs: Raw | UnsetType = UNSET  # (msgspec: a Raw in a union with None only takes null)


class _Completion(Struct):
    choices: list[_CompletionChoice] = []
    usage: _Usage | None = None


_STREAM_CHUNK = msgspec.json.Decoder(_StreamChunk)
_COMPLETION = msgspec.json.Decoder(_Completion)
_ANY = msgspec.json.Decoder()
_ENCODER = msgspec.json.Encoder()


def _present(raw: Raw | UnsetType) -> Raw | UnsetType:
    """A raw JSON value, or UNSET when it is absent or ``null``."""
    return UNSET if raw is UNSET or bytes(raw) == b"null" else raw


def _token_usage(usage: _Usage) -> TokenUsage:
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


def _error_text(detail: _ErrorDetail | str) -> tuple[str, str | None]:
    if isinstance(detail, str):
        return detail, None
    code = None if detail.code is None else str(detail.code)
    return detail.message or "The provider reported an error.", code


# --- streaming -------------------------------------------------------------------------


class OpenAIStreamTranslator(SSEStreamTranslator):
    """OpenAI chat-completion chunks in, normalized chunks out."""

    def __init__(self, new_id: IdFactory, shape: StreamShape = DEFAULT_SHAPE) -> None:
        super().__init__(new_id, shape)
        self._ids: dict[int, list[str]] = {}

    def _event(self, event: ServerSentEvent) -> None:
        if event.is_done:
            self.done = True
            return
        try:
            chunk = _STREAM_CHUNK.decode(event.data)
        except msgspec.DecodeError:
            self.failure = malformed_event()
            return
        if chunk.error is not None or event.event == "error":
            message, code = _error_text(chunk.error or "The provider reported an error.")
            self.failure = UpstreamError(message, code=code or "upstream_stream_error")
            return
        for choice in chunk.choices or ():
            up = choice.delta
            delta = self._delta(choice.index, up) if up is not None else Delta()
            self._emit.delta(
                choice.index,
                delta,
                choice.finish_reason,
                _present(choice.logprobs),
            )
        if chunk.usage is not None:
            self.usage = _token_usage(chunk.usage)

    def _delta(self, index: int, up: _Delta) -> Delta:
        delta = Delta()
        if up.content is not None:
            delta.content = up.content
        reasoning = up.reasoning_content if up.reasoning_content is not None else up.reasoning
        if reasoning is not None:
            delta.reasoning_content = reasoning
        if up.refusal is not None:
            delta.refusal = up.refusal
        if up.tool_calls:
            delta.tool_calls = [self._tool_call(index, call) for call in up.tool_calls]
        return delta

    def _tool_call(self, index: int, call: _ToolCall) -> ToolCallDelta:
        position = call.index
        if position is None:  # servers that omit the index: one call per distinct id
            ids = self._ids.setdefault(index, [])
            if call.id is not None and call.id not in ids:
                ids.append(call.id)
            elif not ids:
                ids.append("")
            position = ids.index(call.id) if call.id is not None else len(ids) - 1
        fn = call.function
        return ToolCallDelta(
            position,
            id=call.id if call.id else UNSET,
            function=FunctionDelta(
                name=fn.name if fn is not None and fn.name is not None else UNSET,
                arguments=fn.arguments if fn is not None and fn.arguments else UNSET,
            ),
        )


# --- the adapter -------------------------------------------------------------------------


def parse_openai_completion(body: bytes, new_id: IdFactory) -> ParsedCompletion:
    try:
        completion = _COMPLETION.decode(body)
    except msgspec.DecodeError:
        raise malformed_response() from None
    if not completion.choices:
        raise UpstreamError("The provider's response has no choices.", code="upstream_empty")
    choices = []
    for up in completion.choices:
        msg = up.message or _Message()
        message = ResponseMessage(content=msg.content)
        reasoning = msg.reasoning_content if msg.reasoning_content is not None else msg.reasoning
        if reasoning is not None:
            message.reasoning_content = reasoning
        if msg.refusal is not None:
            message.refusal = msg.refusal
        if msg.tool_calls:
            message.tool_calls = [
                ResponseToolCall(
                    id=call.id or new_id("call"),
                    function=ResponseFunctionCall(
                        name=(call.function.name if call.function else None) or "",
                        arguments=(call.function.arguments if call.function else None) or "",
                    ),
                )
                for call in msg.tool_calls
            ]
        finish = normalize_finish_reason(up.finish_reason or "stop", bool(msg.tool_calls))
        choice = CompletionChoice(up.index, message, finish)
        logprobs = _present(up.logprobs)
        if logprobs is not UNSET:
            choice.logprobs = logprobs
        choices.append(choice)
    usage = _token_usage(completion.usage) if completion.usage is not None else None
    return ParsedCompletion(choices, usage)


def parse_openai_error(status: int, headers: Mapping[str, str], body: bytes) -> ApiError:
    message: str | None = None
    code: str | None = None
    param: str | None = None
    try:
        doc: Any = _ANY.decode(body)
    except msgspec.DecodeError:
        doc = None
    if isinstance(doc, dict):
        err = doc.get("error", doc)
        if isinstance(err, str):
            message = err
        elif isinstance(err, dict):
            found = err.get("message") or err.get("detail")
            message = found if isinstance(found, str) else None
            code = str(err["code"]) if err.get("code") is not None else None
            param = err["param"] if isinstance(err.get("param"), str) else None
    return error_for_status(
        status, message, code=code, param=param, retry_after=retry_after_seconds(headers)
    )


class OpenAIAdapter(AdapterBase):
    """``openai``, ``openai-compatible`` and ``deepseek`` connections."""

    def build_request(self, req: ChatRequest, target: Target) -> UpstreamRequest:
        conn = target.connection
        body = openai_body(req, target.native_model)
        headers = {"content-type": "application/json"}
        if req.is_stream:
            headers["accept"] = "text/event-stream"
            headers["accept-encoding"] = "identity"
        if conn.api_key is not None:
            headers["authorization"] = "Bearer " + conn.api_key.reveal()
        return UpstreamRequest(
            method="POST",
            url=conn.base_url.rstrip("/") + "/chat/completions",
            headers=headers,
            body=_ENCODER.encode(body),
            stream=req.is_stream,
        )

    def parse_response(
        self, status: int, headers: Mapping[str, str], body: bytes
    ) -> ParsedCompletion:
        return parse_openai_completion(body, self._new_id)

    def parse_error(self, status: int, headers: Mapping[str, str], body: bytes) -> ApiError:
        return parse_openai_error(status, headers, body)

    def stream(self, req: ChatRequest) -> OpenAIStreamTranslator:
        return OpenAIStreamTranslator(self._new_id, self._shape(req))
