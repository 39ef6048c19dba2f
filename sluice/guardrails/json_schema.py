"""A JSON-schema check of structured output: the whole content of a choice must parse
as JSON and satisfy the schema.

The validator covers the keywords structured outputs use: ``type``, ``enum``,
``const``, ``properties``, ``required``, ``additionalProperties``, ``items``,
``prefixItems``, ``minItems``/``maxItems``, ``minLength``/``maxLength``, ``pattern``,
``minimum``/``maximum`` (and exclusive), ``anyOf``/``oneOf``/``allOf``/``not`` and
local ``$ref`` (``#/$defs/…``). Other keywords are ignored, as JSON Schema says.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

from sluice.config import Action, GuardrailConfig
from sluice.errors import ConfigError

_TYPES: tuple[tuple[str, type | tuple[type, ...]], ...] = (
    ("object", dict),
    ("array", list),
    ("string", str),
    ("number", (int, float)),
    ("integer", int),
    ("boolean", bool),
    ("null", type(None)),
)


def _is_type(value: Any, name: str) -> bool:
    if isinstance(value, bool) and name in ("number", "integer"):
        return False
    if name == "integer" and isinstance(value, float):
        return value.is_integer()
    for type_name, py_type in _TYPES:
        if type_name == name:
            return isinstance(value, py_type)
    return False


class SchemaValidator:
    """Validates decoded JSON against one schema (its root resolves ``$ref``)."""

    __slots__ = ("_root",)

    def __init__(self, schema: dict[str, Any]) -> None:
        self._root = schema

    def valid(self, value: Any) -> bool:
        return self._check(value, self._root)

    def _resolve(self, ref: str) -> Any:
        node: Any = self._root
        for raw in ref.removeprefix("#").strip("/").split("/") if ref != "#" else ():
            part = raw.replace("~1", "/").replace("~0", "~")
            node = node.get(part) if isinstance(node, dict) else None
        return node if isinstance(node, dict | bool) else {}

    def _check(self, value: Any, schema: Any) -> bool:
        if isinstance(schema, bool):
            return schema
        if not isinstance(schema, dict):
            return True
        if "$ref" in schema and not self._check(value, self._resolve(str(schema["$ref"]))):
            return False
        return (
            self._check_type(value, schema)
            and self._check_combinators(value, schema)
            and self._check_object(value, schema)
            and self._check_array(value, schema)
            and self._check_scalar(value, schema)
        )

    def _check_type(self, value: Any, schema: dict[str, Any]) -> bool:
        kind = schema.get("type")
        if kind is not None:
            names = kind if isinstance(kind, list) else [kind]
            if not any(_is_type(value, str(n)) for n in names):
                return False
        if "enum" in schema and value not in schema["enum"]:
            return False
        return "const" not in schema or value == schema["const"]

    def _check_combinators(self, value: Any, schema: dict[str, Any]) -> bool:
        if "allOf" in schema and not all(self._check(value, s) for s in schema["allOf"]):
            return False
        if "anyOf" in schema and not any(self._check(value, s) for s in schema["anyOf"]):
            return False
        if "oneOf" in schema and sum(self._check(value, s) for s in schema["oneOf"]) != 1:
            return False
        return "not" not in schema or not self._check(value, schema["not"])

    def _check_object(self, value: Any, schema: dict[str, Any]) -> bool:
        if not isinstance(value, dict):
            return True
        props = schema.get("properties", {})
        if any(name not in value for name in schema.get("required", ())):
            return False
        extra = schema.get("additionalProperties", True)
        return all(self._check(item, props.get(key, extra)) for key, item in value.items())

    def _check_array(self, value: Any, schema: dict[str, Any]) -> bool:
        if not isinstance(value, list):
            return True
        if not schema.get("minItems", 0) <= len(value) <= schema.get("maxItems", len(value)):
            return False
        prefix = schema.get("prefixItems", [])
        if not all(self._check(v, s) for v, s in zip(value, prefix, strict=False)):
            return False
        items = schema.get("items", True)
        return all(self._check(v, items) for v in value[len(prefix) :])

    def _check_scalar(self, value: Any, schema: dict[str, Any]) -> bool:
        if isinstance(value, str):
            if not schema.get("minLength", 0) <= len(value) <= schema.get("maxLength", len(value)):
                return False
            pattern = schema.get("pattern")
            return pattern is None or re.search(str(pattern), value) is not None
        if isinstance(value, int | float) and not isinstance(value, bool):
            return (
                ("minimum" not in schema or value >= schema["minimum"])
                and ("maximum" not in schema or value <= schema["maximum"])
                and ("exclusiveMinimum" not in schema or value > schema["exclusiveMinimum"])
                and ("exclusiveMaximum" not in schema or value < schema["exclusiveMaximum"])
            )
        return True


class SchemaRule:
    """A whole-text rule: the text must be JSON that satisfies the schema."""

    __slots__ = ("_validator", "action", "name")

    def __init__(self, name: str, action: Action, schema: dict[str, Any]) -> None:
        self.name, self.action = name, action
        self._validator = SchemaValidator(schema)

    def accepts(self, text: str) -> bool:
        """Nesting too deep to decode or walk fails the rule like malformed JSON."""
        try:
            return self._validator.valid(msgspec.json.decode(text))
        except (msgspec.DecodeError, RecursionError):
            return False


def schema_rule(conf: GuardrailConfig) -> SchemaRule:
    if conf.schema is None:
        raise ConfigError(f"guardrail {conf.name!r}: kind 'json_schema' needs a `schema`")
    if conf.stage != "output" or conf.action == "redact":
        raise ConfigError(
            f"guardrail {conf.name!r}: a json_schema guardrail checks output, "
            "with action 'block' or 'log'"
        )
    for node in _walk(conf.schema):
        if "pattern" in node and isinstance(node["pattern"], str):
            try:
                re.compile(node["pattern"])
            except re.error as exc:
                raise ConfigError(
                    f"guardrail {conf.name!r}: invalid schema pattern: {exc}"
                ) from None
    return SchemaRule(conf.name, conf.action, conf.schema)


def _walk(node: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            found.append(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found
