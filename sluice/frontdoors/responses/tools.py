"""Responses tools ↔ chat tools, both ways.

A ``custom`` (free-form) tool becomes a function taking one string, ``input``, and a
call of it comes back as a ``custom_tool_call`` with that string. A ``namespace``'s
tools are functions named ``<namespace><name>`` (``__`` between them unless the
namespace ends with ``_``), and a call comes back with its ``namespace`` and own name.
Hosted tools (``web_search``, ``file_search`` …) run at OpenAI, not at the upstreams
the gateway reaches: they are left out, and :func:`omitted` names them.
"""

from __future__ import annotations

import msgspec
from msgspec import UNSET, Raw, UnsetType

from sluice.errors import InvalidRequestError
from sluice.wire.chat import FunctionDefinition, NamedFunction, NamedToolChoice, Tool, ToolChoice
from sluice.wire.responses import NamedTool, ToolSpec

CUSTOM_PARAMETERS = msgspec.json.encode(
    {
        "type": "object",
        "properties": {"input": {"type": "string", "description": "The tool's free-form input."}},
        "required": ["input"],
        "additionalProperties": False,
    }
)
"""The parameters of the function that stands for a free-form tool (decoded per use)."""
_CLIENT_KINDS = ("function", "custom", "namespace")
_TOOLS = msgspec.json.Decoder(list[ToolSpec] | None)
_ARGUMENTS = msgspec.json.Decoder(dict[str, object])
_ENCODER = msgspec.json.Encoder()


def flat_name(namespace: str, name: str) -> str:
    if not namespace:
        return name
    return namespace + name if namespace.endswith("_") else f"{namespace}__{name}"


def custom_arguments(text: str) -> str:
    """A free-form input as the arguments of the function that stands for it."""
    return _ENCODER.encode({"input": text}).decode()


def custom_input(arguments: str) -> str:
    """The free-form input back out of those arguments (as given when they are not)."""
    try:
        value = _ARGUMENTS.decode(arguments)
    except msgspec.DecodeError:
        return arguments
    text = value.get("input")
    return text if isinstance(text, str) else arguments


def chat_tools(specs: list[ToolSpec] | UnsetType | None) -> list[Tool]:
    if not isinstance(specs, list):
        return []
    out: list[Tool] = []
    for k, spec in enumerate(specs):
        if spec.type == "namespace":
            namespace = _named(spec, f"tools[{k}]")
            for j, inner in enumerate(spec.tools or ()):
                out.append(_tool(inner, f"tools[{k}].tools[{j}]", namespace))
        elif spec.type in _CLIENT_KINDS:
            out.append(_tool(spec, f"tools[{k}]", ""))
    return out


def omitted(specs: list[ToolSpec] | UnsetType | None) -> list[str]:
    """The hosted tools the request offered, by type, in order and once each."""
    if not isinstance(specs, list):
        return []
    kinds = [spec.type for spec in specs if spec.type not in _CLIENT_KINDS]
    return list(dict.fromkeys(kinds))


def _named(spec: ToolSpec, param: str) -> str:
    if not isinstance(spec.name, str):
        raise InvalidRequestError(
            f"A {spec.type[:32]} tool needs its name.",
            code="missing_required_parameter",
            param=param + ".name",
        )
    return spec.name


def _tool(spec: ToolSpec, param: str, namespace: str) -> Tool:
    name = flat_name(namespace, _named(spec, param))
    description = spec.description if isinstance(spec.description, str) else UNSET
    if spec.type == "custom":
        fn = FunctionDefinition(name, description, msgspec.json.decode(CUSTOM_PARAMETERS))
    elif spec.type == "function":
        parameters = spec.parameters if isinstance(spec.parameters, dict) else UNSET
        fn = FunctionDefinition(name, description, parameters, spec.strict)
    else:
        raise InvalidRequestError(
            "A namespace holds function and custom tools only.",
            code="invalid_value",
            param=param + ".type",
        )
    return Tool(fn, defer_loading=spec.defer_loading)


def chat_tool_choice(choice: str | NamedTool | UnsetType | None) -> ToolChoice | UnsetType:
    if isinstance(choice, str):
        return choice  # type: ignore[return-value]  # the wire's literal: none, auto, required
    named = isinstance(choice, NamedTool) and choice.type in ("function", "custom")
    if named and isinstance(choice, NamedTool) and isinstance(choice.name, str):
        return NamedToolChoice(NamedFunction(choice.name))
    return UNSET  # a hosted tool's choice: its tool is left out


class ToolNames:
    """A request's tools by the name the upstream calls them: how a call is shown."""

    __slots__ = ("_custom", "_namespaced", "omitted")

    def __init__(self, tools: Raw | None) -> None:
        specs = (_TOOLS.decode(tools) or []) if tools is not None else []
        self._custom: set[str] = set()
        self._namespaced: dict[str, tuple[str, str]] = {}
        self.omitted = omitted(specs)
        for spec in specs:
            inner = spec.tools if spec.type == "namespace" and isinstance(spec.tools, list) else []
            namespace = spec.name if isinstance(spec.name, str) else ""
            for tool in inner:
                if isinstance(tool.name, str):
                    flat = flat_name(namespace, tool.name)
                    self._namespaced[flat] = (namespace, tool.name)
                    if tool.type == "custom":
                        self._custom.add(flat)
            if spec.type == "custom" and isinstance(spec.name, str):
                self._custom.add(spec.name)

    def is_custom(self, flat: str) -> bool:
        return flat in self._custom

    def split(self, flat: str) -> tuple[str | UnsetType, str]:
        """The namespace (UNSET for none) and the tool's own name."""
        found = self._namespaced.get(flat)
        return (UNSET, flat) if found is None else found
