"""Gemini's answers → our chunks (streaming) and choices (whole responses).

Each stream event is a whole ``GenerateContentResponse`` (no ``[DONE]``): text parts
become ``content``, ``thought`` parts ``reasoning_content``. Function calls arrive
whole, so each becomes a first fragment plus one fragment holding all its arguments
(compact JSON), indexed by its order within the candidate. ``usageMetadata`` is
cumulative; the last one wins.

Finish reasons: ``STOP`` → stop, ``MAX_TOKENS`` → length, the safety family →
content_filter, the malformed-output family (``MALFORMED_FUNCTION_CALL`` …) → an
:class:`UpstreamError` (retryable: a retry or another target may do better than an
empty answer), anything else → stop. A prompt blocked before any candidate
(``promptFeedback.blockReason``) is an :class:`InvalidRequestError` with code
``content_filter``, never failed over: the prompt itself was refused.
"""

from __future__ import annotations

from types import MappingProxyType

import msgspec

from sluice.core.usage import TokenUsage, reported_count
from sluice.errors import ApiError, InvalidRequestError, UpstreamError
from sluice.ids import IdFactory
from sluice.providers.base import DEFAULT_SHAPE, ParsedCompletion, StreamShape
from sluice.providers.errors import malformed_response
from sluice.providers.gemini.errors import gemini_error
from sluice.providers.gemini.wire import (
    ENCODER,
    RESPONSE,
    Candidate,
    FunctionCall,
    GenerateContentResponse,
    UsageMetadata,
)
from sluice.providers.normalize import normalize_finish_reason
from sluice.providers.sse_stream import SSEStreamTranslator
from sluice.providers.stream_base import malformed_event
from sluice.wire.chunks import (
    CompletionChoice,
    ResponseFunctionCall,
    ResponseMessage,
    ResponseToolCall,
)
from sluice.wire.sse import ServerSentEvent

FINISH_REASONS = MappingProxyType(
    {
        "STOP": "stop",
        "MAX_TOKENS": "length",
        "CONTINUATION": "length",
        **dict.fromkeys(
            (
                "SAFETY",
                "RECITATION",
                "LANGUAGE",
                "BLOCKLIST",
                "PROHIBITED_CONTENT",
                "SPII",
                "IMAGE_SAFETY",
                "IMAGE_PROHIBITED_CONTENT",
                "IMAGE_RECITATION",
                "ESCALATION",
                "PUP_LIMITED_DISABLED",
            ),
            "content_filter",
        ),
    }
)
FAILED_OUTPUT = frozenset(
    {
        "MALFORMED_FUNCTION_CALL",
        "UNEXPECTED_TOOL_CALL",
        "TOO_MANY_TOOL_CALLS",
        "MISSING_THOUGHT_SIGNATURE",
        "MALFORMED_RESPONSE",
    }
)


def our_finish_reason(reason: str) -> str:
    return FINISH_REASONS.get(reason, "stop")


def failed_output(reason: str) -> UpstreamError:
    return UpstreamError(
        f"The provider could not produce a valid answer (finish reason {reason}).",
        code="upstream_invalid_output",
    )


def prompt_blocked(reason: str) -> InvalidRequestError:
    return InvalidRequestError(
        f"The provider refused the prompt (block reason {reason}).",
        code="content_filter",
        param="messages",
    )


def token_usage(meta: UsageMetadata) -> TokenUsage:
    """``promptTokenCount`` already includes cached content; thoughts are output."""
    thoughts = reported_count(meta.thoughts_token_count)
    return TokenUsage(
        prompt_tokens=reported_count(meta.prompt_token_count)
        + reported_count(meta.tool_use_prompt_token_count),
        completion_tokens=reported_count(meta.candidates_token_count) + thoughts,
        cached_tokens=meta.cached_content_token_count,
        reasoning_tokens=thoughts,
    )


def arguments_json(call: FunctionCall) -> str:
    return ENCODER.encode(call.args or {}).decode()


def _response_error(resp: GenerateContentResponse) -> ApiError | None:
    """What makes the whole response a failure: an error object or a blocked prompt."""
    if resp.error is not None:
        return gemini_error(resp.error, 500)
    feedback = resp.prompt_feedback
    if not resp.candidates and feedback is not None and feedback.block_reason:
        return prompt_blocked(feedback.block_reason)
    return None


# --- streaming -------------------------------------------------------------------------


class GeminiStreamTranslator(SSEStreamTranslator):
    """``streamGenerateContent?alt=sse`` events in, normalized chunks out (no end marker:
    the stream is complete when every candidate has a finish reason)."""

    def __init__(self, new_id: IdFactory, shape: StreamShape = DEFAULT_SHAPE) -> None:
        super().__init__(new_id, shape)
        self._calls: dict[int, int] = {}  # candidate index -> function calls so far

    def _event(self, event: ServerSentEvent) -> None:
        try:
            resp = RESPONSE.decode(event.data)
        except msgspec.DecodeError:
            self.failure = malformed_event()
            return
        if resp.usage_metadata is not None:
            self.usage = token_usage(resp.usage_metadata)
        self.failure = _response_error(resp)
        for candidate in resp.candidates:
            if self.failure is not None:
                return
            self._candidate(candidate)

    def _candidate(self, candidate: Candidate) -> None:
        index = candidate.index
        emit = self._emit
        for part in candidate.content.parts if candidate.content is not None else ():
            call = part.function_call
            if call is not None:
                position = self._calls.get(index, 0)
                self._calls[index] = position + 1
                emit.tool_call(
                    index, position, id=call.id, name=call.name, arguments=arguments_json(call)
                )
            elif part.text:
                if part.thought:
                    emit.reasoning(index, part.text)
                else:
                    emit.text(index, part.text)
        reason = candidate.finish_reason
        if reason in FAILED_OUTPUT:
            self.failure = failed_output(reason)
        elif reason is not None:
            emit.finish(index, our_finish_reason(reason))


# --- whole responses ---------------------------------------------------------------------


def parse_gemini_completion(body: bytes, new_id: IdFactory) -> ParsedCompletion:
    try:
        resp = RESPONSE.decode(body)
    except msgspec.DecodeError:
        raise malformed_response() from None
    failure = _response_error(resp)
    if failure is not None:
        raise failure
    if not resp.candidates:
        raise UpstreamError("The provider's response has no candidates.", code="upstream_empty")
    choices = [_choice(c, new_id) for c in sorted(resp.candidates, key=lambda c: c.index)]
    usage = token_usage(resp.usage_metadata) if resp.usage_metadata is not None else None
    return ParsedCompletion(choices, usage)


def _choice(candidate: Candidate, new_id: IdFactory) -> CompletionChoice:
    reason = candidate.finish_reason or "STOP"
    if reason in FAILED_OUTPUT:
        raise failed_output(reason)
    texts: list[str] = []
    thoughts: list[str] = []
    calls: list[ResponseToolCall] = []
    for part in candidate.content.parts if candidate.content is not None else ():
        call = part.function_call
        if call is not None:
            function = ResponseFunctionCall(name=call.name, arguments=arguments_json(call))
            calls.append(ResponseToolCall(id=call.id or new_id("call"), function=function))
        elif part.text:
            (thoughts if part.thought else texts).append(part.text)
    message = ResponseMessage(content="".join(texts) if texts else None)
    if thoughts:
        message.reasoning_content = "".join(thoughts)
    if calls:
        message.tool_calls = calls
    finish = normalize_finish_reason(our_finish_reason(reason), bool(calls))
    return CompletionChoice(candidate.index, message, finish)
