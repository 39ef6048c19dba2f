"""Our chat request as a Converse request body.

Decisions (the table is in docs/providers.md):

- system and developer messages become ``system`` blocks, wherever they stand;
- tool messages become ``toolResult`` blocks of a user turn; consecutive turns of one
  role are merged and empty ones dropped (Converse wants alternating, non-empty turns);
- a tool result whose text is a JSON object goes as a ``json`` block, anything else
  as ``text``; an assistant tool call's arguments must be JSON (``input``);
- images only as base64 ``data:`` URLs (Converse does not fetch URLs); audio and file
  parts are rejected; ``cache_control`` on a part adds a ``cachePoint`` after it;
- ``tool_choice: "none"``: Converse has no such choice, so the tools are left out,
  unless the conversation holds tool blocks, which Bedrock only accepts with a tool
  configuration: then the tools go without a choice;
- An exact ``reasoning_budget`` (ours) is sent as given on Anthropic models; else
  ``reasoning_effort`` on Anthropic models (the model id names ``anthropic.``) becomes
  a thinking budget in ``additionalModelRequestFields``; other models ignore it;
- ``response_format`` ``json_schema`` becomes ``outputConfig.textFormat`` (name,
  description, and the schema as a JSON string with its objects closed); Converse has
  no JSON mode, so ``json_object`` becomes an instruction appended to ``system``. Both
  follow :mod:`sluice.providers.anthropic.structured`: Bedrock holds Claude models to
  Anthropic's schema limits (an object must say ``additionalProperties: false``);
- ``n`` > 1 is rejected; seed, penalties, logprobs, user and parallel_tool_calls have
  no Converse equivalent and are not sent.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

from sluice.errors import InvalidRequestError
from sluice.providers.anthropic.structured import (
    JSON_OBJECT_INSTRUCTION,
    requested_schema,
    wants_json_object,
)
from sluice.providers.bedrock import converse
from sluice.providers.request_parts import parse_data_url, tool_result_text
from sluice.wire.chat import ChatRequest, NamedToolChoice
from sluice.wire.conversation import (
    AssistantMessage,
    DeveloperMessage,
    ImagePart,
    RefusalPart,
    SystemMessage,
    TextPart,
    ThinkingBlock,
    ToolMessage,
    UserContentPart,
    UserMessage,
)

IMAGE_FORMATS = MappingProxyType(
    {
        "image/png": "png",
        "image/jpeg": "jpeg",
        "image/jpg": "jpeg",
        "image/gif": "gif",
        "image/webp": "webp",
    }
)
THINKING_BUDGETS = MappingProxyType({"low": 1024, "medium": 4096, "high": 16384, "xhigh": 32768})
"""Anthropic's budget_tokens per effort; ``none`` and ``minimal`` turn thinking off."""
MIN_THINKING_BUDGET = 1024
THINKING_ANSWER_TOKENS = 4096
"""Room for the answer when thinking is on and the request set no ``max_tokens``."""

_ENCODER = msgspec.json.Encoder()
_JSON = msgspec.json.Decoder()


def converse_body(req: ChatRequest, native_model: str) -> bytes:
    """The JSON body of ``converse`` / ``converse-stream`` (the model goes in the URL)."""
    if req.choice_count > 1:
        raise InvalidRequestError("Bedrock returns one choice per request; n must be 1.", param="n")
    system: list[converse.Text | converse.CacheBlock] = []
    turns: list[converse.Message] = []
    for i, message in enumerate(req.messages):
        if isinstance(message, SystemMessage | DeveloperMessage):
            system += _text_blocks(message.content)
        elif isinstance(message, UserMessage):
            _add_turn(turns, "user", _user_blocks(i, message.content))
        elif isinstance(message, AssistantMessage):
            _add_turn(turns, "assistant", _assistant_blocks(i, message))
        elif isinstance(message, ToolMessage):
            _add_turn(turns, "user", [_tool_result(message, f"messages[{i}]")])
        else:
            raise InvalidRequestError(
                "Function messages are not supported by Bedrock; use tool messages.",
                param=f"messages[{i}]",
            )
    if wants_json_object(req):
        system.append(converse.Text(JSON_OBJECT_INSTRUCTION))
    body = converse.ConverseBody(turns, system=system or UNSET, output_config=_output_config(req))
    config = _inference_config(req)
    body.additional_model_request_fields = _thinking(req, native_model, config)
    if config != converse.InferenceConfig():
        body.inference_config = config
    body.tool_config = _tool_config(req, turns)
    return _ENCODER.encode(body)


def _add_turn(turns: list[converse.Message], role: str, blocks: list[converse.Block]) -> None:
    if not blocks:
        return
    if turns and turns[-1].role == role:
        turns[-1].content += blocks
    else:
        turns.append(converse.Message(role, blocks))


def _text_blocks(content: str | list[TextPart]) -> list[converse.Text | converse.CacheBlock]:
    if isinstance(content, str):
        return [converse.Text(content)] if content else []
    blocks: list[converse.Text | converse.CacheBlock] = []
    for part in content:
        if part.text:
            blocks.append(converse.Text(part.text))
        if part.cache_control is not UNSET:
            blocks.append(converse.CacheBlock(converse.CachePoint()))
    return blocks


def _user_blocks(i: int, content: str | list[UserContentPart]) -> list[converse.Block]:
    if isinstance(content, str):
        return [converse.Text(content)] if content else []
    blocks: list[converse.Block] = []
    for j, part in enumerate(content):
        if isinstance(part, TextPart):
            blocks += _text_blocks([part])
        elif isinstance(part, ImagePart):
            blocks.append(_image(part.image_url.url, f"messages[{i}].content[{j}].image_url"))
            if part.cache_control is not UNSET:
                blocks.append(converse.CacheBlock(converse.CachePoint()))
        else:
            raise InvalidRequestError(
                "Bedrock accepts text and image parts only.", param=f"messages[{i}].content[{j}]"
            )
    return blocks


def _image(url: str, param: str) -> converse.ImageBlock:
    data_url = parse_data_url(url)
    if data_url is None:
        raise InvalidRequestError(
            "Bedrock accepts images only as base64 data: URLs, not links.", param=param
        )
    image_format = IMAGE_FORMATS.get(data_url.media_type)
    if image_format is None:
        raise InvalidRequestError(
            "Bedrock accepts PNG, JPEG, GIF and WebP images only.", param=param
        )
    data = data_url.data.strip()
    if not data:
        raise InvalidRequestError("The image data is empty.", param=param)
    return converse.ImageBlock(converse.Image(image_format, converse.ImageSource(data)))


def _assistant_blocks(i: int, message: AssistantMessage) -> list[converse.Block]:
    """Signed reasoning first (as the model answered it), then text, then tool calls."""
    blocks: list[converse.Block] = []
    for thought in message.thinking_blocks or ():
        if isinstance(thought, ThinkingBlock):
            reasoning = converse.Reasoning(
                converse.ReasoningText(thought.thinking, thought.signature)
            )
        else:
            reasoning = converse.Reasoning(redacted_content=thought.data)
        blocks.append(converse.ReasoningBlock(reasoning))
    content = message.content
    if isinstance(content, str) and content:
        blocks.append(converse.Text(content))
    elif isinstance(content, list):
        for part in content:
            text = part.refusal if isinstance(part, RefusalPart) else part.text
            if text:
                blocks.append(converse.Text(text))
    for j, call in enumerate(message.tool_calls or ()):
        args = call.function.arguments.strip() or "{}"
        try:
            value = _JSON.decode(args)
        except msgspec.DecodeError:
            raise InvalidRequestError(
                "Tool call arguments must be valid JSON.",
                param=f"messages[{i}].tool_calls[{j}].function.arguments",
            ) from None
        blocks.append(converse.ToolUseBlock(converse.ToolUse(call.id, call.function.name, value)))
    return blocks


def _tool_result(message: ToolMessage, param: str) -> converse.ToolResultBlock:
    text = tool_result_text(message.content, param)
    result: list[converse.Text | converse.Json] = []
    if text:
        try:
            value = _JSON.decode(text)
        except msgspec.DecodeError:
            value = None
        result.append(converse.Json(value) if isinstance(value, dict) else converse.Text(text))
    return converse.ToolResultBlock(converse.ToolResult(message.tool_call_id, result))


def _inference_config(req: ChatRequest) -> converse.InferenceConfig:
    config = converse.InferenceConfig()
    ceiling = req.output_ceiling
    if ceiling is not None:
        config.max_tokens = ceiling
    if isinstance(req.temperature, int | float):
        config.temperature = float(req.temperature)
    if isinstance(req.top_p, int | float):
        config.top_p = float(req.top_p)
    stops = [s for s in req.stop_sequences if s]
    if stops:
        config.stop_sequences = stops
    return config


def _thinking(
    req: ChatRequest, native_model: str, config: converse.InferenceConfig
) -> dict[str, Any] | UnsetType:
    if "anthropic." not in native_model:
        return UNSET
    exact = req.reasoning_budget
    if isinstance(exact, int):  # as the Messages wire gives it: inside max_tokens
        if not isinstance(config.max_tokens, int):
            config.max_tokens = exact + THINKING_ANSWER_TOKENS
        return {"thinking": {"type": "enabled", "budget_tokens": exact}}
    effort = req.reasoning_effort
    if not isinstance(effort, str) or effort in ("none", "minimal"):
        return UNSET
    budget = THINKING_BUDGETS.get(effort)
    if budget is None:
        known = ", ".join(["none", "minimal", *THINKING_BUDGETS])
        raise InvalidRequestError(
            f"reasoning_effort must be one of {known}.", param="reasoning_effort"
        )
    if isinstance(config.max_tokens, int):
        budget = min(budget, config.max_tokens - 1)
        if budget < MIN_THINKING_BUDGET:
            raise InvalidRequestError(
                f"reasoning_effort needs max_tokens above {MIN_THINKING_BUDGET} on this model.",
                param="max_tokens",
            )
    else:
        config.max_tokens = budget + THINKING_ANSWER_TOKENS
    return {"thinking": {"type": "enabled", "budget_tokens": budget}}


def _tool_config(
    req: ChatRequest, turns: list[converse.Message]
) -> converse.ToolConfig | UnsetType:
    tools = [
        converse.Tool(
            converse.ToolSpec(
                t.function.name,
                converse.Schema(t.function.parameters or {"type": "object", "properties": {}}),
                description=t.function.description or UNSET,
            )
        )
        for t in req.tool_list
    ]
    if not tools:
        return UNSET
    choice = req.tool_choice
    if choice == "none":
        holds_tool_blocks = any(
            isinstance(b, converse.ToolUseBlock | converse.ToolResultBlock)
            for t in turns
            for b in t.content
        )
        return converse.ToolConfig(tools) if holds_tool_blocks else UNSET
    if choice == "required":
        return converse.ToolConfig(tools, converse.AnyChoice(converse.Empty()))
    if choice == "auto":
        return converse.ToolConfig(tools, converse.AutoChoice(converse.Empty()))
    if isinstance(choice, NamedToolChoice):
        return converse.ToolConfig(
            tools, converse.SpecificChoice(converse.NamedTool(choice.function.name))
        )
    return converse.ToolConfig(tools)


def _output_config(req: ChatRequest) -> converse.OutputConfig | UnsetType:
    asked = requested_schema(req.response_format)
    if asked is None:
        return UNSET
    spec, schema = asked
    definition = converse.JsonSchema(
        _ENCODER.encode(schema).decode(),
        name=spec.name or UNSET,
        description=spec.description or UNSET,
    )
    return converse.OutputConfig(converse.TextFormat(converse.FormatStructure(definition)))
