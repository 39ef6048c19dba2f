"""A Messages request's settings (everything beside the conversation) → ours.

What is not obvious:

- ``thinking`` ``enabled`` sets the exact ``reasoning_budget`` and, for providers that
  only take an effort, the ``reasoning_effort`` nearest to it; ``adaptive`` leaves the
  amount to the model: the effort is ``output_config.effort`` when given (``max`` reads
  as ``xhigh``, the most an effort-only provider takes), else the provider's default;
  ``disabled`` sets none.
- ``output_config.format`` (``json_schema``) is ``response_format`` for every provider.
- ``tool_choice`` ``any`` is ``required``, ``tool`` a named choice, and
  ``disable_parallel_tool_use`` is ``parallel_tool_calls: false``; a tool's
  ``defer_loading`` is kept.
- Every top-level field the internal request does not model (``thinking``,
  ``output_config``, ``context_management``, fields newer than this gateway…) is kept
  byte for byte in ``native``: the Anthropic adapter sends it on unchanged, other
  providers drop it. ``service_tier`` is dropped (the gateway prices the standard
  tier); ``mcp_servers`` and ``container`` are refused, like server tools: they run
  outside the gateway's metering.
- ``anthropic-beta`` (comma-separated) becomes ``betas``: the Anthropic adapter sends
  it on, other providers drop it.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

import msgspec
from msgspec import UNSET, Raw, UnsetType

from sluice.errors import InvalidRequestError
from sluice.wire.chat import (
    FunctionDefinition,
    JsonSchemaFormat,
    NamedFunction,
    NamedToolChoice,
    NativeFields,
    ResponseFormat,
    Tool,
    ToolChoice,
)
from sluice.wire.messages import (
    MODELLED_FIELDS,
    WIRE,
    MessagesRequest,
    OutputConfigParam,
    ThinkingParam,
    ToolChoiceParam,
    ToolParam,
)

BETA_HEADER = "anthropic-beta"
_FIELDS = msgspec.json.Decoder(dict[str, Raw])
_EFFORTS = ((2048, "low"), (8192, "medium"))
"""A thinking budget up to each bound reads as that effort; above the last, ``high``."""
_EFFORT_NAMES = MappingProxyType(
    {"low": "low", "medium": "medium", "high": "high", "xhigh": "xhigh", "max": "xhigh"}
)
DROPPED_FIELDS = frozenset({"service_tier"})
REFUSED_FIELDS = ("mcp_servers", "container")


def native_fields(body: bytes | bytearray) -> NativeFields:
    """The body's top-level fields the internal request does not model, as sent."""
    fields = _FIELDS.decode(body)
    for name in REFUSED_FIELDS:
        if name in fields:
            raise InvalidRequestError(
                f"'{name}' is not served here: it runs tools outside the gateway.",
                code="unsupported_parameter",
                param=name,
            )
    kept = {k: v for k, v in fields.items() if k not in MODELLED_FIELDS | DROPPED_FIELDS}
    return NativeFields(WIRE, kept)


def reasoning(req: MessagesRequest) -> tuple[int | UnsetType, str | UnsetType]:
    """The exact thinking budget (``enabled``) and the effort for effort-only providers."""
    thinking = req.thinking
    if not isinstance(thinking, ThinkingParam) or thinking.type == "disabled":
        return UNSET, UNSET
    if thinking.type == "adaptive":
        config = req.output_config
        effort = config.effort if isinstance(config, OutputConfigParam) else None
        return UNSET, _EFFORT_NAMES.get(effort, UNSET) if isinstance(effort, str) else UNSET
    budget = thinking.budget_tokens
    if not isinstance(budget, int):
        raise InvalidRequestError(
            "thinking of type 'enabled' needs budget_tokens.",
            code="missing_required_parameter",
            param="thinking.budget_tokens",
        )
    if budget >= req.max_tokens:
        raise InvalidRequestError(
            "thinking.budget_tokens must be less than max_tokens.",
            code="invalid_value",
            param="thinking.budget_tokens",
        )
    return budget, next((name for bound, name in _EFFORTS if budget <= bound), "high")


def response_format(config: OutputConfigParam | UnsetType) -> ResponseFormat | UnsetType:
    """``output_config.format`` of type ``json_schema`` (another type: the upstream's say)."""
    if not isinstance(config, OutputConfigParam):
        return UNSET
    fmt = config.format
    if fmt is UNSET or fmt is None or fmt.type != "json_schema":
        return UNSET
    if not isinstance(fmt.schema, dict):
        raise InvalidRequestError(
            "output_config.format of type 'json_schema' needs a schema.",
            code="missing_required_parameter",
            param="output_config.format.schema",
        )
    return ResponseFormat("json_schema", JsonSchemaFormat("output", fmt.schema))


def tools(params: list[ToolParam] | UnsetType) -> list[Tool] | UnsetType:
    if not isinstance(params, list):
        return UNSET
    out = []
    for k, tool in enumerate(params):
        if tool.type not in (UNSET, None, "custom") or not isinstance(tool.input_schema, dict):
            raise InvalidRequestError(
                "Only client tools (a name and an input_schema) are served here; server "
                "tools are not.",
                code="unsupported_parameter",
                param=f"tools[{k}]",
            )
        fn = FunctionDefinition(tool.name, tool.description, tool.input_schema)
        out.append(Tool(fn, cache_control=tool.cache_control, defer_loading=tool.defer_loading))
    return out


def tool_choice(choice: ToolChoiceParam | UnsetType) -> ToolChoice | UnsetType:
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


def parallel(choice: ToolChoiceParam | UnsetType) -> bool | UnsetType:
    if isinstance(choice, ToolChoiceParam) and choice.disable_parallel_tool_use is True:
        return False
    return UNSET


def user(req: MessagesRequest) -> str | UnsetType:
    meta = req.metadata
    if meta is UNSET or not isinstance(meta.user_id, str):
        return UNSET
    return meta.user_id


def betas(headers: Mapping[str, str]) -> list[str] | UnsetType:
    header = headers.get(BETA_HEADER)
    if not header:
        return UNSET
    names = [name.strip() for name in header.split(",") if name.strip()]
    return names or UNSET
