"""Our chat request → the body of an Anthropic Messages request.

What is not obvious:

- System and developer messages are lifted into ``system`` in order: one string
  (blocks joined by a blank line), or a list of text blocks when any part carries
  ``cache_control`` (kept on each block, as on user text and image parts). A request
  that came on the Messages wire keeps a system message that stands after the first
  turn where it stands (a ``system`` turn, as its client sent it), and has the fields
  it kept as sent (``native``: ``thinking``, ``output_config``,
  ``context_management``…) sent on unchanged, over what would be built here.
- Anthropic needs user and assistant turns to alternate: neighbours of one role are
  merged into one turn. Tool results are ``tool_result`` blocks of a user turn, so
  consecutive tool messages, and user text right after them, share one turn. Empty
  text is dropped (Anthropic rejects empty text blocks), and a message left empty too.
- ``reasoning_effort`` → ``thinking: {type: "enabled", budget_tokens}`` from
  :data:`THINKING_BUDGETS` (``none``: no thinking). As in OpenAI's API, the client's
  ``max_tokens`` counts thinking too: the budget is capped below it and a cap under
  Anthropic's minimum budget (1024) is refused. Without a client cap the answer keeps
  :data:`DEFAULT_MAX_TOKENS` on top of the budget.
- ``response_format`` ``json_schema`` → ``output_config.format`` (Anthropic's
  structured outputs: the text answer is JSON that fits the schema, its objects
  closed); ``json_object`` → an instruction appended to ``system``
  (:mod:`.structured` says why).
- An exact ``reasoning_budget`` (ours; the Messages front door sets it) is sent as
  given, inside the client's ``max_tokens`` as Anthropic counts it.
- ``temperature`` is passed as given (Anthropic's range is 0 to 1; it answers 400
  above), ``top_k`` too. ``seed``, penalties, ``logprobs``, ``logit_bias`` and an
  image's ``detail`` have no equivalent and are dropped, and so is an assistant's bare
  ``reasoning_content``: Anthropic takes thinking back only with the signature it
  issued, which ``thinking_blocks`` carry (they go first in the turn, as sent).
  Documents, ``cache_control`` on tools, tool calls and tool results, a tool result's
  images and ``is_error`` are sent as given. ``n > 1`` is refused: Anthropic returns
  one answer per request.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Literal

from msgspec import UNSET, Raw, UnsetType

from sluice.errors import InvalidRequestError
from sluice.providers.anthropic.request_wire import (
    MessagesRequest,
    Metadata,
    ThinkingParam,
    ToolChoiceParam,
    ToolParam,
)
from sluice.providers.anthropic.structured import (
    JSON_OBJECT_INSTRUCTION,
    anthropic_output_config,
    wants_json_object,
)
from sluice.providers.request_parts import parse_data_url, tool_arguments_object
from sluice.wire.chat import ChatRequest, NamedToolChoice, NativeFields
from sluice.wire.conversation import (
    AssistantMessage,
    DeveloperMessage,
    DocumentPart,
    ImagePart,
    RefusalPart,
    SystemMessage,
    TextPart,
    ToolMessage,
    UserContentPart,
    UserMessage,
)
from sluice.wire.conversation import ThinkingBlock as SignedThinking
from sluice.wire.messages import WIRE as MESSAGES_WIRE
from sluice.wire.messages import (
    Base64Source,
    DocumentBlock,
    ImageBlock,
    MessageParam,
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    UrlSource,
)
from sluice.wire.messages import ContentBlock as Block

Role = Literal["user", "assistant", "system"]
DEFAULT_MAX_TOKENS = 4096
"""``max_tokens`` when the client sets none (Anthropic requires one)."""

MIN_THINKING_BUDGET = 1024
THINKING_BUDGETS: Mapping[str, int] = MappingProxyType(
    {"minimal": 1024, "low": 2048, "medium": 8192, "high": 16384, "xhigh": 32768}
)
"""``reasoning_effort`` → ``thinking.budget_tokens``."""


# --- building it ---------------------------------------------------------------------


def anthropic_request(req: ChatRequest, native_model: str) -> MessagesRequest:
    if req.choice_count > 1:
        raise InvalidRequestError(
            "This provider returns one choice per request; n must be 1.", param="n"
        )
    system, messages = _conversation(req)
    max_tokens, thinking = _output_budget(req)
    user = req.user
    return MessagesRequest(
        model=native_model,
        max_tokens=max_tokens,
        messages=messages,
        system=system,
        stop_sequences=req.stop_sequences or UNSET,
        temperature=_given(req.temperature),
        top_p=_given(req.top_p),
        top_k=req.top_k if isinstance(req.top_k, int) else UNSET,
        tools=_tools(req),
        tool_choice=_tool_choice(req),
        thinking=thinking,
        output_config=anthropic_output_config(req.response_format),
        metadata=Metadata(user) if isinstance(user, str) else UNSET,
        stream=True if req.is_stream else UNSET,
    )


def from_messages_wire(req: ChatRequest) -> bool:
    native = req.native
    return isinstance(native, NativeFields) and native.wire == MESSAGES_WIRE


def _given(value: float | UnsetType | None) -> float | UnsetType:
    return UNSET if value is None else value


class _Turns:
    """The conversation in Anthropic's alternation: neighbours of one role merged. A
    turn that is one message whose content was a string is sent as that string; content
    sent as parts stays blocks (the client's form, whichever it chose)."""

    __slots__ = ("_turns",)

    def __init__(self) -> None:
        self._turns: list[tuple[Role, list[Block], bool, Raw | None]] = []

    @property
    def started(self) -> bool:
        return bool(self._turns)

    def add(
        self, role: Role, blocks: list[Block], *, plain: bool = False, config: Raw | None = None
    ) -> None:
        if not blocks:
            return
        if self._turns and self._turns[-1][0] == role != "system":
            self._turns[-1][1].extend(blocks)
            self._turns[-1] = (role, self._turns[-1][1], False, None)
        else:
            self._turns.append((role, blocks, plain, config))

    def messages(self) -> list[MessageParam]:
        return [
            MessageParam(role, _compact(blocks, plain), UNSET if config is None else config)
            for role, blocks, plain, config in self._turns
        ]


def _compact(blocks: list[Block], plain: bool) -> str | list[Block]:
    if plain and len(blocks) == 1 and isinstance(blocks[0], TextBlock):
        return blocks[0].text
    return blocks


def _conversation(req: ChatRequest) -> tuple[str | list[TextBlock] | UnsetType, list[MessageParam]]:
    system: list[TextBlock] = []
    turns = _Turns()
    in_place = from_messages_wire(req)
    for i, message in enumerate(req.messages):
        if isinstance(message, SystemMessage | DeveloperMessage):
            if in_place and turns.started:
                blocks = list[Block](_text_blocks(message.content))
                turns.add("system", blocks, config=_turn_config(message))
            else:
                system += _text_blocks(message.content)
        elif isinstance(message, UserMessage):
            plain = isinstance(message.content, str)
            turns.add("user", _user_blocks(i, message.content), plain=plain)
        elif isinstance(message, AssistantMessage):
            plain = isinstance(message.content, str) and not message.tool_calls
            plain = plain and not message.thinking_blocks
            turns.add("assistant", _assistant_blocks(i, message), plain=plain)
        elif isinstance(message, ToolMessage):
            turns.add("user", [_tool_result(i, message)])
        else:
            raise InvalidRequestError(
                "Messages with role 'function' are not supported by this provider; "
                "send tool messages instead.",
                param=f"messages[{i}]",
            )
    if wants_json_object(req):
        system.append(TextBlock(JSON_OBJECT_INSTRUCTION))
    return _system(system), turns.messages()


def _turn_config(message: SystemMessage | DeveloperMessage) -> Raw | None:
    config = message.output_config if isinstance(message, SystemMessage) else UNSET
    return config if isinstance(config, Raw) else None


def _system(blocks: list[TextBlock]) -> str | list[TextBlock] | UnsetType:
    if not blocks:
        return UNSET
    if any(b.cache_control is not UNSET for b in blocks):
        return blocks
    return "\n\n".join(b.text for b in blocks)


def _text_blocks(content: str | list[TextPart]) -> list[TextBlock]:
    parts = [TextPart(content)] if isinstance(content, str) else content
    return [TextBlock(p.text, p.cache_control) for p in parts if p.text]


def _user_blocks(i: int, content: str | list[UserContentPart]) -> list[Block]:
    if isinstance(content, str):
        return [TextBlock(content)] if content else []
    blocks: list[Block] = []
    for j, part in enumerate(content):
        if isinstance(part, TextPart):
            if part.text:
                blocks.append(TextBlock(part.text, part.cache_control))
        elif isinstance(part, ImagePart):
            blocks.append(_image(part, f"messages[{i}].content[{j}].image_url.url"))
        elif isinstance(part, DocumentPart):
            blocks.append(
                DocumentBlock(
                    part.source, part.title, part.context, part.citations, part.cache_control
                )
            )
        else:
            raise InvalidRequestError(
                "This provider accepts text and image content parts only.",
                param=f"messages[{i}].content[{j}]",
            )
    return blocks


def _image(part: ImagePart, param: str) -> ImageBlock:
    return ImageBlock(_image_source(part.image_url.url, param), part.cache_control)


def _image_source(url: str, param: str) -> Base64Source | UrlSource:
    if url.startswith(("https://", "http://")):
        return UrlSource(url)
    data_url = parse_data_url(url)
    if data_url is not None:
        return Base64Source(media_type=data_url.media_type, data=data_url.data)
    raise InvalidRequestError("An image must be an http(s) URL or a base64 data: URL.", param=param)


def _assistant_blocks(i: int, message: AssistantMessage) -> list[Block]:
    """Signed thinking first, then text, then tool calls: the order Anthropic answers in."""
    content = message.content
    blocks: list[Block] = []
    if isinstance(message.thinking_blocks, list):
        for thought in message.thinking_blocks:
            if isinstance(thought, SignedThinking):
                blocks.append(ThinkingBlock(thought.thinking, thought.signature))
            else:
                blocks.append(RedactedThinkingBlock(thought.data))
    if isinstance(content, str) and content:
        blocks.append(TextBlock(content))
    elif isinstance(content, list):
        for part in content:
            if isinstance(part, TextPart) and part.text:
                blocks.append(TextBlock(part.text, part.cache_control))
            elif isinstance(part, RefusalPart) and part.refusal:
                blocks.append(TextBlock(part.refusal))
    if isinstance(message.tool_calls, list):
        for j, call in enumerate(message.tool_calls):
            param = f"messages[{i}].tool_calls[{j}].function.arguments"
            fn = call.function
            arguments = tool_arguments_object(fn.arguments, param)
            blocks.append(ToolUseBlock(call.id, fn.name, arguments, call.cache_control))
    return blocks


def _tool_result(i: int, message: ToolMessage) -> ToolResultBlock:
    content = message.content
    result: str | list[TextBlock | ImageBlock] | UnsetType = UNSET
    if isinstance(content, str):
        result = content or UNSET
    else:
        parts: list[TextBlock | ImageBlock] = []
        for j, part in enumerate(content):
            if isinstance(part, ImagePart):
                parts.append(_image(part, f"messages[{i}].content[{j}].image_url.url"))
            elif part.text:
                parts.append(TextBlock(part.text, part.cache_control))
        result = parts or UNSET
    error = True if message.is_error is True else UNSET
    return ToolResultBlock(message.tool_call_id, result, error, message.cache_control)


def _tools(req: ChatRequest) -> list[ToolParam] | UnsetType:
    if not req.tool_list:
        return UNSET
    tools = []
    for tool in req.tool_list:
        fn = tool.function
        schema = fn.parameters if isinstance(fn.parameters, dict) else None
        tools.append(
            ToolParam(
                name=fn.name,
                input_schema=schema or {"type": "object", "properties": {}},
                description=fn.description,
                strict=True if fn.strict is True else UNSET,
                cache_control=tool.cache_control,
                defer_loading=tool.defer_loading,
            )
        )
    return tools


def _tool_choice(req: ChatRequest) -> ToolChoiceParam | UnsetType:
    """Sent only with tools; ``parallel_tool_calls: false`` rides on it."""
    if not req.tool_list:
        return UNSET
    choice = req.tool_choice
    single: bool | UnsetType = True if req.parallel_tool_calls is False else UNSET
    if choice == "none":
        return ToolChoiceParam("none")
    if choice == "required":
        return ToolChoiceParam("any", disable_parallel_tool_use=single)
    if isinstance(choice, NamedToolChoice):
        return ToolChoiceParam("tool", name=choice.function.name, disable_parallel_tool_use=single)
    if choice == "auto" or single is True:
        return ToolChoiceParam("auto", disable_parallel_tool_use=single)
    return UNSET


def _output_budget(req: ChatRequest) -> tuple[int, ThinkingParam | UnsetType]:
    """``max_tokens`` and the thinking budget inside it."""
    ceiling = req.output_ceiling
    exact = req.reasoning_budget
    if isinstance(exact, int):  # as the Messages wire gives it: inside max_tokens
        return ceiling or DEFAULT_MAX_TOKENS + exact, ThinkingParam(exact)
    effort = req.reasoning_effort
    if not isinstance(effort, str) or effort == "none":
        return ceiling or DEFAULT_MAX_TOKENS, UNSET
    budget = THINKING_BUDGETS.get(effort)
    if budget is None:
        known = ", ".join(["none", *THINKING_BUDGETS])
        raise InvalidRequestError(
            f"reasoning_effort must be one of {known}.", param="reasoning_effort"
        )
    if ceiling is None:
        return DEFAULT_MAX_TOKENS + budget, ThinkingParam(budget)
    budget = min(budget, ceiling - 1)
    if budget < MIN_THINKING_BUDGET:
        raise InvalidRequestError(
            f"With reasoning_effort, this provider needs max_tokens above "
            f"{MIN_THINKING_BUDGET} (thinking counts toward it).",
            param="max_tokens",
        )
    return ceiling, ThinkingParam(budget)
