"""Our chat request → Gemini's ``GenerateContentRequest`` body.

What is not one-to-one (docs/providers.md has the whole table):

- system and developer messages, wherever they stand, become ``systemInstruction``
  parts, in order; consecutive turns of one role are merged (Gemini alternates
  ``user`` and ``model``), tool results travel as ``functionResponse`` parts of a user
  turn, named after the assistant tool call with the same id.
- Replayed assistant tool calls carry Google's documented placeholder
  ``thoughtSignature`` on the first call of each turn: Gemini 3 rejects replayed
  calls without a signature, and the real one never reached the client.
- Tool parameters and ``json_schema`` formats go out as ``parametersJsonSchema`` and
  ``responseJsonSchema``, the fields that take plain JSON Schema (``parameters`` and
  ``responseSchema`` take an OpenAPI subset that has rejected keywords such as
  ``additionalProperties``, which strict OpenAI tools always carry).
- An exact ``reasoning_budget`` (ours) is the thinking budget; else
  ``reasoning_effort`` becomes a thinking budget with thoughts included (so they
  stream as ``reasoning_content``); ``none`` turns thinking off.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any, TypeVar

import msgspec
from msgspec import Raw, Struct, UnsetType

from sluice.errors import InvalidRequestError
from sluice.providers.gemini.wire import (
    Blob,
    Content,
    FileData,
    FunctionCall,
    FunctionCallingConfig,
    FunctionDeclaration,
    FunctionResponse,
    FunctionTools,
    GenerateContentRequest,
    GenerationConfig,
    Part,
    ThinkingConfig,
    ToolConfig,
)
from sluice.providers.request_parts import (
    parse_data_url,
    refuse_document,
    tool_arguments_object,
    tool_result_text,
)
from sluice.wire.chat import ChatRequest, JsonSchemaFormat, NamedToolChoice, ResponseFormat
from sluice.wire.conversation import (
    AssistantMessage,
    AudioPart,
    DeveloperMessage,
    DocumentPart,
    FilePart,
    ImagePart,
    RefusalPart,
    SystemMessage,
    TextPart,
    ToolMessage,
    UserContentPart,
    UserMessage,
)

SKIP_SIGNATURE = "skip_thought_signature_validator"
"""Google's placeholder for a function call whose thought signature is unknown."""

THINKING_BUDGETS = MappingProxyType(
    {"none": 0, "minimal": 512, "low": 1024, "medium": 8192, "high": 24576, "xhigh": 24576}
)
_TOOL_MODES = MappingProxyType({"auto": "AUTO", "none": "NONE", "required": "ANY"})
_MIME_BY_EXTENSION = MappingProxyType(
    {
        "png": "image/png",
        "jpg": "image/jpeg",
        "jpeg": "image/jpeg",
        "gif": "image/gif",
        "webp": "image/webp",
        "heic": "image/heic",
        "heif": "image/heif",
        "pdf": "application/pdf",
    }
)
_DEFAULT_IMAGE_MIME = "image/jpeg"
_ANY = msgspec.json.Decoder()
_T = TypeVar("_T")


class _InputAudio(Struct):
    data: str
    format: str


class _InputFile(Struct):
    file_data: str | None = None
    file_id: str | None = None


def gemini_body(req: ChatRequest) -> GenerateContentRequest:
    system: list[Part] = []
    turns: list[Content] = []
    calls: dict[str, str] = {}  # tool-call id -> function name, for tool results
    for i, message in enumerate(req.messages):
        if isinstance(message, SystemMessage | DeveloperMessage):
            system += _text_parts(_joined_text(message.content))
        elif isinstance(message, UserMessage):
            _add_turn(turns, "user", _user_parts(message.content, i))
        elif isinstance(message, AssistantMessage):
            _add_turn(turns, "model", _assistant_parts(message, i, calls))
        elif isinstance(message, ToolMessage):
            name = calls.get(message.tool_call_id)
            if name is None:
                raise InvalidRequestError(
                    f"No assistant tool call has the id {message.tool_call_id!r}.",
                    param=f"messages[{i}].tool_call_id",
                )
            text = tool_result_text(message.content, f"messages[{i}]")
            result = FunctionResponse(name, _result_object(text))
            _add_turn(turns, "user", [Part(function_response=result)])
        else:  # the legacy "function" role names its function itself
            result = FunctionResponse(message.name, _result_object(message.content or ""))
            _add_turn(turns, "user", [Part(function_response=result)])
    return GenerateContentRequest(
        contents=turns,
        system_instruction=Content(parts=system) if system else None,
        tools=_tools(req),
        tool_config=_tool_config(req),
        generation_config=_generation_config(req),
    )


def _add_turn(turns: list[Content], role: str, parts: list[Part]) -> None:
    if not parts:
        return
    if turns and turns[-1].role == role:
        turns[-1].parts.extend(parts)
    else:
        turns.append(Content(parts=parts, role=role))


def _text_parts(text: str) -> list[Part]:
    """Gemini rejects empty text parts; an empty text is no part at all."""
    return [Part(text=text)] if text else []


def _joined_text(content: str | list[TextPart]) -> str:
    return content if isinstance(content, str) else "".join(p.text for p in content)


# --- message parts -------------------------------------------------------------------


def _user_parts(content: str | list[UserContentPart], i: int) -> list[Part]:
    if isinstance(content, str):
        return _text_parts(content)
    parts = []
    for j, part in enumerate(content):
        param = f"messages[{i}].content[{j}]"
        if isinstance(part, TextPart):
            parts += _text_parts(part.text)
        elif isinstance(part, ImagePart):
            parts.append(_image(part.image_url.url, param + ".image_url.url"))
        elif isinstance(part, AudioPart):
            audio = _convert(part.input_audio, _InputAudio, param + ".input_audio")
            parts.append(Part(inline_data=Blob(f"audio/{audio.format}", audio.data)))
        elif isinstance(part, DocumentPart):
            refuse_document(part, param)
        else:
            parts.append(_file(part, param + ".file"))
    return parts


def _image(url: str, param: str) -> Part:
    if url.startswith("data:"):
        return Part(inline_data=_data_url(url, param))
    if url.startswith(("https://", "http://")):
        path = url.split("?", 1)[0].split("#", 1)[0]
        extension = path.rsplit("/", 1)[-1].rpartition(".")[2].lower()
        mime = _MIME_BY_EXTENSION.get(extension, _DEFAULT_IMAGE_MIME)
        return Part(file_data=FileData(file_uri=url, mime_type=mime))
    raise InvalidRequestError("Image URLs must be http(s) or base64 data: URLs.", param=param)


def _file(part: FilePart, param: str) -> Part:
    file = _convert(part.file, _InputFile, param)
    if file.file_data is None:
        raise InvalidRequestError(
            "Only inline files (file_data) can be sent to this provider.", param=param
        )
    return Part(inline_data=_data_url(file.file_data, param + ".file_data"))


def _data_url(url: str, param: str) -> Blob:
    """``data:<mime>;base64,<data>`` → an inline blob."""
    data_url = parse_data_url(url)
    if data_url is None:
        raise InvalidRequestError(
            "Expected a data: URL of the form data:<mime type>;base64,<data>.", param=param
        )
    return Blob(mime_type=data_url.media_type, data=data_url.data)


def _convert(raw: Raw, kind: type[_T], param: str) -> _T:
    try:
        return msgspec.json.decode(raw, type=kind)
    except msgspec.DecodeError as exc:
        raise InvalidRequestError(f"Invalid content part: {exc}", param=param) from None


def _assistant_parts(message: AssistantMessage, i: int, calls: dict[str, str]) -> list[Part]:
    content = message.content
    if isinstance(content, str):
        text = content
    elif isinstance(content, list):
        text = "".join(p.text for p in content if not isinstance(p, RefusalPart))
    else:
        text = ""
    parts = _text_parts(text)
    for j, call in enumerate(message.tool_calls or ()):
        calls[call.id] = call.function.name
        param = f"messages[{i}].tool_calls[{j}].function.arguments"
        args = tool_arguments_object(call.function.arguments, param)
        parts.append(
            Part(
                function_call=FunctionCall(name=call.function.name, args=args),
                thought_signature=SKIP_SIGNATURE if j == 0 else None,
            )
        )
    return parts


def _result_object(text: str) -> dict[str, Any]:
    """A tool's result: its JSON object as is, anything else wrapped as ``content``."""
    try:
        value = _ANY.decode(text)
    except msgspec.DecodeError:
        value = None
    return value if isinstance(value, dict) else {"content": text}


# --- tools and generation settings ----------------------------------------------------


def _tools(req: ChatRequest) -> list[FunctionTools] | None:
    if not req.tool_list:
        return None
    declarations = [
        FunctionDeclaration(
            name=tool.function.name,
            description=_given(tool.function.description),
            parameters_json_schema=_given(tool.function.parameters),
        )
        for tool in req.tool_list
    ]
    return [FunctionTools(declarations)]


def _tool_config(req: ChatRequest) -> ToolConfig | None:
    choice = req.tool_choice
    if isinstance(choice, NamedToolChoice):
        config = FunctionCallingConfig("ANY", [choice.function.name])
    elif isinstance(choice, str):
        config = FunctionCallingConfig(_TOOL_MODES[choice])
    else:
        return None
    return ToolConfig(config)


def _generation_config(req: ChatRequest) -> GenerationConfig | None:
    config = GenerationConfig(
        stop_sequences=req.stop_sequences or None,
        max_output_tokens=req.output_ceiling,
        temperature=_given(req.temperature),
        top_p=_given(req.top_p),
        seed=_given(req.seed),
        candidate_count=_given(req.n),
        presence_penalty=_given(req.presence_penalty),
        frequency_penalty=_given(req.frequency_penalty),
        thinking_config=_exact_thinking(req.reasoning_budget) or _thinking(req.reasoning_effort),
    )
    fmt = req.response_format
    if isinstance(fmt, ResponseFormat) and fmt.type != "text":
        config.response_mime_type = "application/json"
        if isinstance(fmt.json_schema, JsonSchemaFormat):
            config.response_json_schema = _given(fmt.json_schema.schema)
    return None if config == GenerationConfig() else config


def _exact_thinking(budget: int | UnsetType | None) -> ThinkingConfig | None:
    """An exact ``reasoning_budget`` (ours), over ``reasoning_effort``."""
    return ThinkingConfig(thinking_budget=budget, include_thoughts=True) if budget else None


def _thinking(effort: str | UnsetType | None) -> ThinkingConfig | None:
    if not isinstance(effort, str):
        return None
    budget = THINKING_BUDGETS.get(effort)
    if budget is None:
        known = ", ".join(THINKING_BUDGETS)
        raise InvalidRequestError(
            f"Unsupported reasoning_effort {effort!r} (one of: {known}).",
            param="reasoning_effort",
        )
    return ThinkingConfig(thinking_budget=budget, include_thoughts=True if budget else None)


def _given(value: _T | UnsetType | None) -> _T | None:
    return None if isinstance(value, UnsetType) else value
