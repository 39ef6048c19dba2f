"""A Responses request → our internal request.

What is not obvious:

- ``instructions`` is the first system message; ``input`` as a string is one user
  message. A message item's role maps to ours (``developer`` kept), its parts to chat
  parts (``output_text`` of an earlier answer is assistant text).
- ``function_call`` items (and ``custom_tool_call`` ones) become the tool calls of
  one assistant message, merged with the assistant text right before them;
  ``function_call_output`` items become tool messages, each for a call made earlier
  in the input (else 400 naming its ``call_id``).
- Tools: a ``function`` as itself; a ``custom`` (free-form) tool as a function taking
  one string, ``input``; a ``namespace``'s tools under the namespace's name joined to
  theirs. Hosted tools (``web_search`` …) are left out of the upstream request (the
  answer names them in ``X-Sluice-Omitted-Tools``), never a 400 that stops an agent.
  :mod:`.tools` maps the names back.
- ``reasoning`` items are left out: no upstream Sluice reaches takes OpenAI's
  encrypted reasoning back, and their summaries were the model's own words.
- ``previous_response_id``: the input is decoded here with its tool outputs unchecked
  (their calls may be in the earlier turns); :mod:`.memory` brings the stored
  conversation back before the plan and decodes it all again, checked.
  ``item_reference`` items are refused (400 ``invalid_value``): not served.
- The response echoes what the request set: those fields are kept as sent in
  ``native`` (wire ``responses``), which no provider sends on.
"""

from __future__ import annotations

from types import MappingProxyType

import msgspec
from msgspec import UNSET, Raw, UnsetType

from sluice.errors import InvalidRequestError
from sluice.frontdoors.responses.reasoning import Unseal
from sluice.frontdoors.responses.tools import (
    chat_tool_choice,
    chat_tools,
    custom_arguments,
    flat_name,
)
from sluice.wire.bounds import DEFAULT_MAX_JSON_DEPTH
from sluice.wire.chat import (
    ChatRequest,
    JsonSchemaFormat,
    NativeFields,
    ResponseFormat,
    StreamOptions,
)
from sluice.wire.conversation import (
    AssistantMessage,
    DeveloperMessage,
    FilePart,
    FunctionCall,
    ImagePart,
    ImageURL,
    Message,
    SystemMessage,
    TextPart,
    ThinkingBlocks,
    ToolCall,
    ToolMessage,
    UserContentPart,
    UserMessage,
)
from sluice.wire.errors import decode_body
from sluice.wire.responses import (
    ContentPart,
    InputFile,
    InputImage,
    InputItem,
    InputText,
    OutputTextPart,
    RefusalPart,
    ResponsesRequest,
    TextConfig,
)

WIRE = "responses"
ECHOED = frozenset(
    {"instructions", "tools", "tool_choice", "parallel_tool_calls", "max_output_tokens"}
    | {"temperature", "top_p", "text", "reasoning", "metadata", "store", "user"}
    | {"prompt_cache_key", "include", "previous_response_id", "input", "background"}
)
"""The request's fields the response repeats (kept as sent in ``native``)."""
_REQUEST = msgspec.json.Decoder(ResponsesRequest)
_FIELDS = msgspec.json.Decoder(dict[str, Raw])
_ENCODER = msgspec.json.Encoder()
_EFFORTS = MappingProxyType({"max": "xhigh"})


def decode_responses_request(
    body: bytes | bytearray, max_depth: int = DEFAULT_MAX_JSON_DEPTH
) -> ChatRequest:
    req = decode_body(_REQUEST, body, max_depth)
    if req.background is True and req.store is False:
        raise InvalidRequestError(
            "background needs store: a background response is kept to be read later "
            "(leave store out, or set it true).",
            code="invalid_value",
            param="store",
        )
    fields = _FIELDS.decode(body)
    stream = req.stream is True
    continued = isinstance(req.previous_response_id, str)
    return ChatRequest(
        model=req.model,
        messages=instructions(req.instructions) + conversation(req.input, checked=not continued),
        stream=True if stream else UNSET,
        stream_options=StreamOptions(include_usage=True) if stream else UNSET,
        tools=chat_tools(req.tools) or UNSET,
        tool_choice=chat_tool_choice(req.tool_choice),
        parallel_tool_calls=req.parallel_tool_calls,
        max_completion_tokens=req.max_output_tokens,
        temperature=req.temperature,
        top_p=req.top_p,
        response_format=_format(req.text),
        reasoning_effort=_effort(req),
        user=req.user,
        prompt_cache_key=fields.get("prompt_cache_key", UNSET),
        models=req.models,
        cache=req.cache,
        native=NativeFields(WIRE, {k: v for k, v in fields.items() if k in ECHOED}),
    )


def instructions(instructions: str | UnsetType | None) -> list[Message]:
    return [SystemMessage(instructions)] if isinstance(instructions, str) and instructions else []


def conversation(
    items: str | list[InputItem], *, checked: bool = True, unseal: Unseal | None = None
) -> list[Message]:
    """The input items as messages; ``checked``: each tool output answers a call made
    earlier in ``items`` (else 400 naming its ``call_id``); ``unseal``: a reasoning
    item's ``encrypted_content`` is opened into the thinking blocks of the assistant
    turn after it (without it, reasoning items are left out)."""
    if isinstance(items, str):
        return [UserMessage(items)]
    out: list[Message] = []
    calls: set[str] | None = set() if checked else None
    thoughts: ThinkingBlocks = []
    for i, item in enumerate(items):
        kind = item.type
        if kind == "message":
            out.append(_message(i, item))
        elif kind in ("function_call", "custom_tool_call"):
            call = _call(i, item)
            if calls is not None:
                calls.add(call.id)
            last = out[-1] if out else None
            if isinstance(last, AssistantMessage) and last.refusal is UNSET:
                last.tool_calls = [*(last.tool_calls or ()), call]
            else:
                out.append(AssistantMessage(content=None, tool_calls=[call]))
        elif kind in ("function_call_output", "custom_tool_call_output"):
            out.append(_output(i, item, calls))
        elif kind == "reasoning":
            sealed = item.encrypted_content
            if unseal is not None and isinstance(sealed, str):
                thoughts += unseal(sealed, f"input[{i}].encrypted_content")
            continue
        elif kind == "item_reference":
            raise InvalidRequestError(
                "item_reference items are not served; send the item itself, or continue "
                "a stored response with previous_response_id.",
                code="invalid_value",
                param=f"input[{i}]",
            )
        else:
            raise InvalidRequestError(
                f"Unsupported input item type '{kind[:64]}'.",
                code="invalid_value",
                param=f"input[{i}].type",
            )
        last = out[-1] if out else None
        if thoughts and isinstance(last, AssistantMessage):
            last.thinking_blocks = [*(last.thinking_blocks or ()), *thoughts]
            thoughts = []
    if not out:
        raise InvalidRequestError(
            "input must hold at least one message.", code="invalid_value", param="input"
        )
    return out


def _message(i: int, item: InputItem) -> Message:
    role, content = item.role, item.content
    if role is UNSET or content is UNSET or content is None:
        missing = "role" if role is UNSET else "content"
        raise InvalidRequestError(
            f"A message item needs its {missing}.",
            code="missing_required_parameter",
            param=f"input[{i}].{missing}",
        )
    if role == "assistant":
        return _assistant(i, content)
    if role in ("system", "developer"):
        text = content if isinstance(content, str) else _texts(i, content)
        return SystemMessage(text) if role == "system" else DeveloperMessage(text)
    if isinstance(content, str):
        return UserMessage(content)
    return UserMessage([_user_part(f"input[{i}].content[{j}]", p) for j, p in enumerate(content)])


def _assistant(i: int, content: str | list[ContentPart]) -> AssistantMessage:
    if isinstance(content, str):
        return AssistantMessage(content=content)
    texts: list[str] = []
    refusal: str | UnsetType = UNSET
    for j, part in enumerate(content):
        if isinstance(part, OutputTextPart | InputText):
            texts.append(part.text)
        elif isinstance(part, RefusalPart):
            refusal = part.refusal
        else:
            raise InvalidRequestError(
                "An assistant message holds text parts only.",
                code="invalid_value",
                param=f"input[{i}].content[{j}]",
            )
    return AssistantMessage(content="".join(texts) if texts else None, refusal=refusal)


def _texts(i: int, parts: list[ContentPart]) -> list[TextPart]:
    out = []
    for j, part in enumerate(parts):
        if not isinstance(part, InputText | OutputTextPart):
            raise InvalidRequestError(
                "A system or developer message holds text parts only.",
                code="invalid_value",
                param=f"input[{i}].content[{j}]",
            )
        out.append(TextPart(part.text))
    return out


def _user_part(param: str, part: ContentPart) -> UserContentPart:
    if isinstance(part, InputText | OutputTextPart):
        return TextPart(part.text)
    if isinstance(part, InputImage):
        if not isinstance(part.image_url, str):
            raise InvalidRequestError(
                "An input_image needs an image_url (a URL or a data: URL); file ids are "
                "not served.",
                code="unsupported_parameter",
                param=param + ".image_url",
            )
        detail = part.detail if isinstance(part.detail, str) else UNSET
        return ImagePart(ImageURL(part.image_url, detail))
    if isinstance(part, InputFile):
        if not isinstance(part.file_data, str):
            raise InvalidRequestError(
                "An input_file needs file_data (a base64 data: URL); file ids and URLs are "
                "not served.",
                code="unsupported_parameter",
                param=param + ".file_data",
            )
        name = part.filename if isinstance(part.filename, str) else "file"
        document = {"file_data": part.file_data, "filename": name}
        return FilePart(Raw(_ENCODER.encode(document)))
    raise InvalidRequestError(
        "A refusal part belongs to an assistant message.", code="invalid_value", param=param
    )


def _call(i: int, item: InputItem) -> ToolCall:
    call_id, name = item.call_id, item.name
    for field, value in (("call_id", call_id), ("name", name)):
        if not isinstance(value, str):
            raise InvalidRequestError(
                f"A {item.type} item needs its {field}.",
                code="missing_required_parameter",
                param=f"input[{i}].{field}",
            )
    assert isinstance(call_id, str) and isinstance(name, str)
    namespace = item.namespace if isinstance(item.namespace, str) else ""
    if item.type == "custom_tool_call":
        arguments = custom_arguments(item.input if isinstance(item.input, str) else "")
    elif isinstance(item.arguments, str):
        arguments = item.arguments
    else:
        raise InvalidRequestError(
            "A function_call item needs its arguments (a JSON string).",
            code="missing_required_parameter",
            param=f"input[{i}].arguments",
        )
    return ToolCall(call_id, FunctionCall(flat_name(namespace, name), arguments))


def _output(i: int, item: InputItem, calls: set[str] | None) -> ToolMessage:
    call_id = item.call_id
    if not isinstance(call_id, str) or (calls is not None and call_id not in calls):
        raise InvalidRequestError(
            f"No earlier function call in input has call_id '{str(call_id)[:64]}'.",
            code="invalid_value",
            param=f"input[{i}].call_id",
        )
    output = item.output
    if isinstance(output, str):
        return ToolMessage(output, call_id)
    if output is UNSET:
        raise InvalidRequestError(
            f"A {item.type} item needs its output.",
            code="missing_required_parameter",
            param=f"input[{i}].output",
        )
    parts: list[TextPart | ImagePart] = []
    for j, part in enumerate(output):
        converted = _user_part(f"input[{i}].output[{j}]", part)
        if not isinstance(converted, TextPart | ImagePart):
            raise InvalidRequestError(
                "A tool's output holds text and images only.",
                code="invalid_value",
                param=f"input[{i}].output[{j}]",
            )
        parts.append(converted)
    return ToolMessage(parts, call_id)


def _format(text: TextConfig | UnsetType | None) -> ResponseFormat | UnsetType:
    if not isinstance(text, TextConfig) or text.format is UNSET:
        return UNSET
    fmt = text.format
    if fmt.type == "json_object":
        return ResponseFormat("json_object")
    if fmt.type != "json_schema":
        return UNSET
    if not isinstance(fmt.name, str) or not isinstance(fmt.schema, dict):
        field = "name" if not isinstance(fmt.name, str) else "schema"
        raise InvalidRequestError(
            f"text.format of type 'json_schema' needs its {field}.",
            code="missing_required_parameter",
            param=f"text.format.{field}",
        )
    schema = JsonSchemaFormat(fmt.name, fmt.schema, fmt.description, fmt.strict)
    return ResponseFormat("json_schema", schema)


def _effort(req: ResponsesRequest) -> str | UnsetType:
    reasoning = req.reasoning
    if reasoning is UNSET or reasoning is None or not isinstance(reasoning.effort, str):
        return UNSET
    return _EFFORTS.get(reasoning.effort, reasoning.effort)
