"""A Messages request → our internal request, keeping everything a provider may need.

What is not obvious:

- ``system`` becomes one system message (its blocks, ``cache_control`` kept).
- A user turn's ``tool_result`` blocks become tool messages, in order, and the turn's
  other blocks a user message after them (each run of them where it stood); an
  assistant turn becomes one assistant message: its ``thinking`` and
  ``redacted_thinking`` blocks as signed ``thinking_blocks``, its text as ``content``,
  its ``tool_use`` blocks as tool calls (``input`` as JSON text).
- A ``system`` turn inside ``messages`` (text only) becomes a system message where it
  stands: the Anthropic adapter sends it there, other providers lift it into their
  system prompt (OpenAI's wire keeps it in place too).
- An image's base64 source becomes a ``data:`` URL; a document goes on as it came.
- The settings beside the conversation (thinking, tools, fields kept as sent): see
  :mod:`.options`. Usage is always reported (the stream's last events carry it).
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec
from msgspec import UNSET

from sluice.errors import InvalidRequestError
from sluice.frontdoors.messages import options
from sluice.wire.bounds import DEFAULT_MAX_JSON_DEPTH
from sluice.wire.chat import ChatRequest, StreamOptions
from sluice.wire.conversation import (
    AssistantMessage,
    DocumentPart,
    FunctionCall,
    ImagePart,
    ImageURL,
    Message,
    RedactedThinkingBlock,
    SystemMessage,
    TextPart,
    ThinkingBlock,
    ThinkingBlocks,
    ToolCall,
    ToolMessage,
    UserContentPart,
    UserMessage,
)
from sluice.wire.errors import decode_body
from sluice.wire.messages import (
    Base64Source,
    ContentBlock,
    CountTokensRequest,
    DocumentBlock,
    ImageBlock,
    MessageParam,
    MessagesRequest,
    TextBlock,
    ThinkingParam,
    ToolResultBlock,
    ToolUseBlock,
)
from sluice.wire.messages import RedactedThinkingBlock as RedactedBlock
from sluice.wire.messages import ThinkingBlock as SignedBlock

_REQUEST = msgspec.json.Decoder(MessagesRequest)
_COUNT = msgspec.json.Decoder(CountTokensRequest)
_ENCODER = msgspec.json.Encoder()


def decode_messages_request(
    body: bytes | bytearray,
    headers: Mapping[str, str],
    max_depth: int = DEFAULT_MAX_JSON_DEPTH,
) -> ChatRequest:
    req = decode_body(_REQUEST, body, max_depth)
    budget, effort = options.reasoning(req)
    return ChatRequest(
        model=req.model,
        messages=_system(req.system) + _conversation(req.messages),
        stream=True if req.stream is True else UNSET,
        stream_options=StreamOptions(include_usage=True) if req.stream is True else UNSET,
        max_tokens=req.max_tokens,
        stop=req.stop_sequences or UNSET,
        temperature=req.temperature,
        top_p=req.top_p,
        top_k=req.top_k,
        user=options.user(req),
        tools=options.tools(req.tools),
        tool_choice=options.tool_choice(req.tool_choice),
        parallel_tool_calls=options.parallel(req.tool_choice),
        response_format=options.response_format(req.output_config),
        reasoning_budget=budget,
        reasoning_effort=effort,
        betas=options.betas(headers),
        models=req.models,
        cache=req.cache,
        native=options.native_fields(body),
    )


def decode_count_request(
    body: bytes | bytearray, max_depth: int = DEFAULT_MAX_JSON_DEPTH
) -> ChatRequest:
    """A count_tokens body as the prompt of a request (nothing is generated from it)."""
    req = decode_body(_COUNT, body, max_depth)
    thinking = req.thinking
    budget = thinking.budget_tokens if isinstance(thinking, ThinkingParam) else UNSET
    return ChatRequest(
        model=req.model,
        messages=_system(req.system) + _conversation(req.messages),
        tools=options.tools(req.tools),
        tool_choice=options.tool_choice(req.tool_choice),
        reasoning_budget=budget if thinking is not UNSET and thinking.type == "enabled" else UNSET,
    )


def _system(system: str | list[TextBlock] | msgspec.UnsetType) -> list[Message]:
    if isinstance(system, str):
        return [SystemMessage(system)] if system else []
    if isinstance(system, list) and system:
        return [SystemMessage([TextPart(b.text, b.cache_control) for b in system])]
    return []


def _conversation(turns: list[MessageParam]) -> list[Message]:
    out: list[Message] = []
    for i, turn in enumerate(turns):
        if turn.role == "system":
            out.append(_system_turn(i, turn))
            continue
        if isinstance(turn.content, str):  # plain text stays plain text
            plain = UserMessage(turn.content) if turn.role == "user" else None
            out.append(plain or AssistantMessage(content=turn.content))
            continue
        blocks = turn.content
        if not blocks and (turn.role == "user" or i < len(turns) - 1):
            raise InvalidRequestError(
                "A turn's content must not be empty (only a final assistant turn's may be).",
                code="invalid_value",
                param=f"messages[{i}].content",
            )
        if turn.role == "user":
            out += _user_turn(i, blocks)
        else:
            out.append(_assistant_turn(i, blocks))
    return out


def _system_turn(i: int, turn: MessageParam) -> SystemMessage:
    content = turn.content
    if isinstance(content, str):
        return SystemMessage(content, output_config=turn.output_config)
    for j, block in enumerate(content):
        if not isinstance(block, TextBlock):
            raise InvalidRequestError(
                f"A system turn holds text blocks only, not '{_kind(block)}'.",
                code="invalid_value",
                param=f"messages[{i}].content[{j}]",
            )
    texts = [b for b in content if isinstance(b, TextBlock)]
    parts = [TextPart(b.text, b.cache_control) for b in texts]
    return SystemMessage(parts, output_config=turn.output_config)


def _user_turn(i: int, blocks: list[ContentBlock]) -> list[Message]:
    """Tool results as tool messages; each run of other blocks as one user message."""
    out: list[Message] = []
    parts: list[UserContentPart] = []
    for j, block in enumerate(blocks):
        if isinstance(block, ToolResultBlock):
            if parts:
                out.append(UserMessage(parts))
                parts = []
            out.append(_tool_message(block))
        else:
            parts.append(_user_part(block, f"messages[{i}].content[{j}]"))
    if parts:
        out.append(UserMessage(parts))
    return out


def _user_part(block: ContentBlock, param: str) -> UserContentPart:
    if isinstance(block, TextBlock):
        return TextPart(block.text, block.cache_control)
    if isinstance(block, ImageBlock):
        return _image(block)
    if isinstance(block, DocumentBlock):
        return DocumentPart(
            block.source, block.title, block.context, block.citations, block.cache_control
        )
    raise InvalidRequestError(
        f"A user turn cannot hold a '{_kind(block)}' block.", code="invalid_value", param=param
    )


def _kind(block: ContentBlock) -> str:
    """The block's ``type`` as the client sent it (its tag)."""
    return str(block.__struct_config__.tag)


def _image(block: ImageBlock) -> ImagePart:
    source = block.source
    if isinstance(source, Base64Source):
        url = f"data:{source.media_type};base64,{source.data}"
    else:
        url = source.url
    return ImagePart(ImageURL(url), block.cache_control)


def _tool_message(block: ToolResultBlock) -> ToolMessage:
    content = block.content
    result: str | list[TextPart | ImagePart]
    if isinstance(content, list):
        result = [
            _image(b) if isinstance(b, ImageBlock) else TextPart(b.text, b.cache_control)
            for b in content
        ]
    else:
        result = content if isinstance(content, str) else ""
    return ToolMessage(result, block.tool_use_id, block.is_error, block.cache_control)


def _assistant_turn(i: int, blocks: list[ContentBlock]) -> AssistantMessage:
    texts: list[TextPart] = []
    thoughts: ThinkingBlocks = []
    calls: list[ToolCall] = []
    for j, block in enumerate(blocks):
        if isinstance(block, TextBlock):
            texts.append(TextPart(block.text, block.cache_control))
        elif isinstance(block, SignedBlock):
            thoughts.append(ThinkingBlock(block.thinking, block.signature))
        elif isinstance(block, RedactedBlock):
            thoughts.append(RedactedThinkingBlock(block.data))
        elif isinstance(block, ToolUseBlock):
            arguments = _ENCODER.encode(block.input).decode()
            calls.append(
                ToolCall(
                    block.id, FunctionCall(block.name, arguments), cache_control=block.cache_control
                )
            )
        else:
            raise InvalidRequestError(
                f"An assistant turn cannot hold a '{_kind(block)}' block.",
                code="invalid_value",
                param=f"messages[{i}].content[{j}]",
            )
    plain = all(t.cache_control is UNSET for t in texts)
    return AssistantMessage(
        content=("".join(t.text for t in texts) if plain else list(texts)) if texts else None,
        tool_calls=calls or UNSET,
        thinking_blocks=thoughts or UNSET,
    )
