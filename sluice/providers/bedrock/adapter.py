"""The ``aws-bedrock`` adapter: Converse over HTTP, signed by the transport
(:mod:`.endpoint`); embeddings through InvokeModel (:mod:`.embeddings`, mixed in).

Errors are typed by the ``x-amzn-errortype`` header (or a ``__type`` field); InvokeModel
answers its errors the same way as Converse (``{"message": …}`` and that header).
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec
from msgspec import Raw, Struct

from sluice.core.connection import Target
from sluice.core.upstream_request import UpstreamRequest
from sluice.errors import ApiError, UpstreamError
from sluice.ids import IdFactory
from sluice.providers.base import AdapterBase, ParsedCompletion
from sluice.providers.bedrock.embeddings import BedrockEmbeddings
from sluice.providers.bedrock.endpoint import model_request
from sluice.providers.bedrock.mapping import (
    Usage,
    bedrock_error,
    error_type_name,
    finish_reason,
    token_usage,
)
from sluice.providers.bedrock.request import converse_body
from sluice.providers.bedrock.stream import BedrockStreamTranslator
from sluice.providers.errors import malformed_response, retry_after_seconds
from sluice.providers.normalize import normalize_finish_reason
from sluice.wire.chat import ChatRequest
from sluice.wire.chunks import (
    CompletionChoice,
    ResponseFunctionCall,
    ResponseMessage,
    ResponseToolCall,
)
from sluice.wire.conversation import RedactedThinkingBlock, ThinkingBlock, ThinkingBlocks

EVENTSTREAM = "application/vnd.amazon.eventstream"

# --- the Converse response (decode only) ------------------------------------------------


class _ToolUse(Struct, rename="camel"):
    tool_use_id: str = ""
    name: str = ""
    input: Raw = msgspec.field(default_factory=lambda: Raw(b"{}"))
    type: str | None = None


class _ReasoningText(Struct):
    text: str = ""
    signature: str | None = None


class _Reasoning(Struct, rename="camel"):
    reasoning_text: _ReasoningText | None = None
    redacted_content: str | None = None


class _Block(Struct, rename="camel"):
    text: str | None = None
    tool_use: _ToolUse | None = None
    reasoning_content: _Reasoning | None = None


class _Message(Struct):
    content: list[_Block] = []


class _Output(Struct):
    message: _Message | None = None


class _ConverseResponse(Struct, rename="camel"):
    output: _Output | None = None
    stop_reason: str | None = None
    usage: Usage | None = None


class _ErrorBody(Struct):
    message: str | None = None
    capital_message: str | None = msgspec.field(default=None, name="Message")
    type: str | None = msgspec.field(default=None, name="__type")


_RESPONSE = msgspec.json.Decoder(_ConverseResponse)
_ERROR = msgspec.json.Decoder(_ErrorBody)


def parse_converse_response(body: bytes, new_id: IdFactory) -> ParsedCompletion:
    try:
        response = _RESPONSE.decode(body)
    except msgspec.DecodeError:
        raise malformed_response() from None
    if response.output is None or response.output.message is None:
        raise UpstreamError("The provider's response has no message.", code="upstream_empty")
    texts: list[str] = []
    reasoning: list[str] = []
    signed: ThinkingBlocks = []
    calls: list[ResponseToolCall] = []
    for block in response.output.message.content:
        if block.text is not None:
            texts.append(block.text)
        thought = block.reasoning_content
        if thought is not None and thought.reasoning_text is not None:
            reasoning.append(thought.reasoning_text.text)
            if thought.reasoning_text.signature:
                text = thought.reasoning_text
                signed.append(ThinkingBlock(text.text, text.signature or ""))
        if thought is not None and thought.redacted_content:
            signed.append(RedactedThinkingBlock(thought.redacted_content))
        tool = block.tool_use
        if tool is not None and tool.type != "server_tool_use":
            args = bytes(tool.input).decode()
            function = ResponseFunctionCall(name=tool.name, arguments=args)
            calls.append(ResponseToolCall(id=tool.tool_use_id or new_id("call"), function=function))
    message = ResponseMessage(content="".join(texts) if texts else None)
    if reasoning:
        message.reasoning_content = "".join(reasoning)
    if signed:
        message.thinking_blocks = signed
    if calls:
        message.tool_calls = calls
    finish = normalize_finish_reason(finish_reason(response.stop_reason), bool(calls))
    usage = token_usage(response.usage) if response.usage is not None else None
    return ParsedCompletion([CompletionChoice(0, message, finish)], usage)


def parse_bedrock_error(status: int, headers: Mapping[str, str], body: bytes) -> ApiError:
    try:
        doc = _ERROR.decode(body)
    except msgspec.DecodeError:
        doc = _ErrorBody()
    error_type = error_type_name(headers.get("x-amzn-errortype") or doc.type)
    message = doc.message or doc.capital_message
    return bedrock_error(error_type, status, message, retry_after_seconds(headers))


class BedrockAdapter(AdapterBase, BedrockEmbeddings):
    """``aws-bedrock`` connections: the Converse API of Bedrock Runtime."""

    def build_request(self, req: ChatRequest, target: Target) -> UpstreamRequest:
        body = converse_body(req, target.native_model)
        action = "converse-stream" if req.is_stream else "converse"
        headers = {"content-type": "application/json"}
        if req.is_stream:
            headers["accept"] = EVENTSTREAM
            headers["accept-encoding"] = "identity"
        else:
            headers["accept"] = "application/json"
        return model_request(target, action, headers, body, stream=req.is_stream)

    def parse_response(
        self, status: int, headers: Mapping[str, str], body: bytes
    ) -> ParsedCompletion:
        return parse_converse_response(body, self._new_id)

    def parse_error(self, status: int, headers: Mapping[str, str], body: bytes) -> ApiError:
        return parse_bedrock_error(status, headers, body)

    def stream(self, req: ChatRequest) -> BedrockStreamTranslator:
        return BedrockStreamTranslator(self._new_id, self._shape(req))
