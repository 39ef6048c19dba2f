"""A Messages request → our internal request, keeping everything a provider may need.

What is not obvious:

- ``system`` becomes one system message (its blocks, ``cache_control`` kept).
- A user turn's ``tool_result`` blocks become tool messages, in order, and the turn's
  other blocks a user message after them (each run of them where it stood); an
  assistant turn becomes one assistant message: its ``thinking`` and
  ``redacted_thinking`` blocks as signed ``thinking_blocks``, its text as ``content``,
  its ``tool_use`` blocks as tool calls (``input`` as JSON text).
- An image's base64 source becomes a ``data:`` URL; a document goes on as it came.
- ``thinking`` ``enabled`` sets the exact ``reasoning_budget`` and, for providers that
  only take an effort, the ``reasoning_effort`` nearest to it; ``disabled`` sets none.
- ``tool_choice`` ``any`` is ``required``, ``tool`` a named choice, and
  ``disable_parallel_tool_use`` is ``parallel_tool_calls: false``.
- ``anthropic-beta`` (comma-separated) becomes ``betas``: the Anthropic adapter sends
  it on, other providers drop it. Usage is always reported (the stream's last events
  carry it).
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec
from msgspec import UNSET

from sluice.errors import InvalidRequestError
from sluice.wire.bounds import DEFAULT_MAX_JSON_DEPTH
from sluice.wire.chat import (
    AssistantMessage,
    ChatRequest,
    DocumentPart,
    FunctionCall,
    FunctionDefinition,
    ImagePart,
    ImageURL,
    Message,
    NamedFunction,
    NamedToolChoice,
    RedactedThinkingBlock,
    StreamOptions,
    SystemMessage,
    TextPart,
    ThinkingBlock,
    ThinkingBlocks,
    Tool,
    ToolCall,
    ToolChoice,
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
    ToolChoiceParam,
    ToolParam,
    ToolResultBlock,
    ToolUseBlock,
)
from sluice.wire.messages import RedactedThinkingBlock as RedactedBlock
from sluice.wire.messages import ThinkingBlock as SignedBlock

BETA_HEADER = "anthropic-beta"
_REQUEST = msgspec.json.Decoder(MessagesRequest)
_COUNT = msgspec.json.Decoder(CountTokensRequest)
_ENCODER = msgspec.json.Encoder()
_EFFORTS = ((2048, "low"), (8192, "medium"))
"""A thinking budget up to each bound reads as that effort; above the last, ``high``."""


def decode_messages_request(
    body: bytes | bytearray,
    headers: Mapping[str, str],
    max_depth: int = DEFAULT_MAX_JSON_DEPTH,
) -> ChatRequest:
    req = decode_body(_REQUEST, body, max_depth)
    budget, effort = _thinking(req.thinking, req.max_tokens)
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
        user=_user(req),
        tools=_tools(req.tools),
        tool_choice=_tool_choice(req.tool_choice),
        parallel_tool_calls=_parallel(req.tool_choice),
        reasoning_budget=budget,
        reasoning_effort=effort,
        betas=_betas(headers.get(BETA_HEADER)),
        models=req.models,
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
        tools=_tools(req.tools),
        tool_choice=_tool_choice(req.tool_choice),
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


def _tools(tools: list[ToolParam] | msgspec.UnsetType) -> list[Tool] | msgspec.UnsetType:
    if not isinstance(tools, list):
        return UNSET
    out = []
    for k, tool in enumerate(tools):
        if tool.type not in (UNSET, None, "custom") or not isinstance(tool.input_schema, dict):
            raise InvalidRequestError(
                "Only client tools (a name and an input_schema) are served here; server "
                "tools are not.",
                code="unsupported_parameter",
                param=f"tools[{k}]",
            )
        fn = FunctionDefinition(tool.name, tool.description, tool.input_schema)
        out.append(Tool(fn, cache_control=tool.cache_control))
    return out


def _tool_choice(choice: ToolChoiceParam | msgspec.UnsetType) -> ToolChoice | msgspec.UnsetType:
    if not isinstance(choice, ToolChoiceParam):
        return UNSET
    if choice.type == "tool":
        if not isinstance(choice.name, str) or not choice.name:
            raise InvalidRequestError(
                "tool_choice of type 'tool' needs the tool's name.",
                code="missing_required_parameter",
                param="tool_choice.name",
            )
        return NamedToolChoice(NamedFunction(choice.name))
    if choice.type == "any":
        return "required"
    return choice.type


def _parallel(choice: ToolChoiceParam | msgspec.UnsetType) -> bool | msgspec.UnsetType:
    if isinstance(choice, ToolChoiceParam) and choice.disable_parallel_tool_use is True:
        return False
    return UNSET


def _thinking(
    thinking: ThinkingParam | msgspec.UnsetType, max_tokens: int
) -> tuple[int | msgspec.UnsetType, str | msgspec.UnsetType]:
    if not isinstance(thinking, ThinkingParam) or thinking.type == "disabled":
        return UNSET, UNSET
    budget = thinking.budget_tokens
    if not isinstance(budget, int):
        raise InvalidRequestError(
            "thinking of type 'enabled' needs budget_tokens.",
            code="missing_required_parameter",
            param="thinking.budget_tokens",
        )
    if budget >= max_tokens:
        raise InvalidRequestError(
            "thinking.budget_tokens must be less than max_tokens.",
            code="invalid_value",
            param="thinking.budget_tokens",
        )
    effort = next((name for bound, name in _EFFORTS if budget <= bound), "high")
    return budget, effort


def _user(req: MessagesRequest) -> str | msgspec.UnsetType:
    meta = req.metadata
    if meta is UNSET or not isinstance(meta.user_id, str):
        return UNSET
    return meta.user_id


def _betas(header: str | None) -> list[str] | msgspec.UnsetType:
    if not header:
        return UNSET
    names = [name.strip() for name in header.split(",") if name.strip()]
    return names or UNSET
