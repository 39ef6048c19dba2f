"""The ``anthropic`` adapter: request, whole answer and error in, our shapes out.

``base_url`` is the host root (``https://api.anthropic.com``); a trailing ``/v1`` is
tolerated so both spellings reach ``/v1/messages``. Authentication is ``x-api-key``;
the request's ``betas`` go in ``anthropic-beta``.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec
from msgspec import UNSET

from sluice.core.connection import Target
from sluice.core.upstream_request import UpstreamRequest
from sluice.core.usage import reported_count
from sluice.errors import ApiError
from sluice.ids import IdFactory
from sluice.providers.anthropic.request import anthropic_request, from_messages_wire
from sluice.providers.anthropic.request_wire import (
    CountTokensAnswer,
    CountTokensRequest,
    MessagesRequest,
)
from sluice.providers.anthropic.stream import AnthropicStreamTranslator
from sluice.providers.anthropic.upstream import (
    MESSAGE,
    UsageCounter,
    anthropic_error,
    anthropic_stop_to_finish_reason,
    error_detail,
    tool_input_json,
)
from sluice.providers.base import AdapterBase, CountsTokens, ParsedCompletion
from sluice.providers.errors import malformed_response, retry_after_seconds
from sluice.providers.normalize import normalize_finish_reason
from sluice.wire.chat import ChatRequest, NativeFields
from sluice.wire.chunks import (
    CompletionChoice,
    ResponseFunctionCall,
    ResponseMessage,
    ResponseToolCall,
)
from sluice.wire.conversation import RedactedThinkingBlock, ThinkingBlock, ThinkingBlocks

ANTHROPIC_VERSION = "2023-06-01"
_ENCODER = msgspec.json.Encoder()
_COUNT = msgspec.json.Decoder(CountTokensAnswer)


def messages_url(base_url: str) -> str:
    root = base_url.rstrip("/")
    if root.endswith("/v1"):
        root = root[: -len("/v1")]
    return root + "/v1/messages"


def parse_anthropic_message(body: bytes, new_id: IdFactory) -> ParsedCompletion:
    """A whole Message: text blocks joined into ``content``, thinking into
    ``reasoning_content`` (and, with the signatures and redacted blocks, into
    ``thinking_blocks``), ``tool_use`` blocks into tool calls (``input`` as JSON text)."""
    try:
        message = MESSAGE.decode(body)
    except msgspec.DecodeError:
        message = None
    if message is None or message.type != "message":
        raise malformed_response()
    texts: list[str] = []
    thoughts: list[str] = []
    signed: ThinkingBlocks = []
    calls: list[ResponseToolCall] = []
    for block in message.content:
        if block.type == "text":
            texts.append(block.text or "")
        elif block.type == "thinking":
            thoughts.append(block.thinking or "")
            signed.append(ThinkingBlock(block.thinking or "", block.signature or ""))
        elif block.type == "redacted_thinking":
            signed.append(RedactedThinkingBlock(block.data or ""))
        elif block.type == "tool_use":
            calls.append(
                ResponseToolCall(
                    id=block.id or new_id("call"),
                    function=ResponseFunctionCall(
                        name=block.name or "", arguments=tool_input_json(block)
                    ),
                )
            )
    result = ResponseMessage(content="".join(texts) if texts or not calls else None)
    if thoughts:
        result.reasoning_content = "".join(thoughts)
    if signed:
        result.thinking_blocks = signed
    if calls:
        result.tool_calls = calls
    reason = anthropic_stop_to_finish_reason(message.stop_reason)
    choice = CompletionChoice(0, result, normalize_finish_reason(reason, bool(calls)))
    if message.stop_sequence is not None:
        choice.stop_sequence = message.stop_sequence
    usage = UsageCounter().update(message.usage) if message.usage is not None else None
    return ParsedCompletion([choice], usage)


def parse_anthropic_error(status: int, headers: Mapping[str, str], body: bytes) -> ApiError:
    return anthropic_error(status, error_detail(body), retry_after_seconds(headers))


def _with_native(body: MessagesRequest, req: ChatRequest) -> bytes:
    """The body with the fields a Messages-wire client sent that we do not model, as
    sent (over what was built for the same names)."""
    native = req.native
    if not from_messages_wire(req) or not isinstance(native, NativeFields) or not native.fields:
        return _ENCODER.encode(body)
    ours = {name: UNSET for name in native.fields if name in MessagesRequest.__struct_fields__}
    head = _ENCODER.encode(msgspec.structs.replace(body, **ours) if ours else body)
    return head[:-1] + b"," + _ENCODER.encode(native.fields)[1:]


class AnthropicAdapter(AdapterBase, CountsTokens):
    """``anthropic`` connections (the Messages API), which count a prompt's tokens."""

    def build_request(self, req: ChatRequest, target: Target) -> UpstreamRequest:
        conn = target.connection
        headers = {"content-type": "application/json", "anthropic-version": ANTHROPIC_VERSION}
        if req.is_stream:
            headers["accept"] = "text/event-stream"
            headers["accept-encoding"] = "identity"
        if conn.api_key is not None:
            headers["x-api-key"] = conn.api_key.reveal()
        if isinstance(req.betas, list) and req.betas:
            headers["anthropic-beta"] = ",".join(req.betas)
        return UpstreamRequest(
            method="POST",
            url=messages_url(conn.base_url),
            headers=headers,
            body=_with_native(anthropic_request(req, target.native_model), req),
            stream=req.is_stream,
        )

    def parse_response(
        self, status: int, headers: Mapping[str, str], body: bytes
    ) -> ParsedCompletion:
        return parse_anthropic_message(body, self._new_id)

    def parse_error(self, status: int, headers: Mapping[str, str], body: bytes) -> ApiError:
        return parse_anthropic_error(status, headers, body)

    def count_request(self, req: ChatRequest, target: Target) -> UpstreamRequest:
        """``/v1/messages/count_tokens`` with the prompt of the request, as it would be
        sent."""
        full = anthropic_request(req, target.native_model)
        body = CountTokensRequest(
            full.model, full.messages, full.system, full.tools, full.tool_choice, full.thinking
        )
        up = self.build_request(msgspec.structs.replace(req, stream=UNSET), target)
        up.url, up.body = up.url + "/count_tokens", _ENCODER.encode(body)
        return up

    def parse_count(self, body: bytes) -> int:
        try:
            return reported_count(_COUNT.decode(body).input_tokens)
        except msgspec.DecodeError:
            raise malformed_response() from None

    def stream(self, req: ChatRequest) -> AnthropicStreamTranslator:
        return AnthropicStreamTranslator(self._new_id, self._shape(req))
