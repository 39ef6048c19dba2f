"""``response_format`` on Claude: structured outputs, and JSON mode where there is none.

Claude's structured outputs (``output_config.format`` on Anthropic, ``outputConfig.
textFormat`` on Bedrock's Converse) constrain the text answer to a JSON schema, always:
there is no best-effort form, so OpenAI's ``strict`` has nothing to choose between.
An object in that schema must say ``additionalProperties: false``; an object schema
that leaves it unsaid, or sets anything else, is answered with a 400. Hence the rule:

- ``json_schema``: the schema is sent with ``additionalProperties: false`` added to
  every object that leaves it unsaid (as a schema written for OpenAI without
  ``strict`` usually does; the official Anthropic SDK's ``transform_schema`` closes
  every object too before its parse helpers send a schema). An explicit value is kept
  as given: a map-shaped object (``additionalProperties: {…}``) is refused by the
  upstream with its own message rather than silently narrowed to ``{}``. Only schema
  positions are walked: an ``enum``, ``const`` or ``default`` value is data, as sent.
- ``json_object`` (any JSON object) has no schema form: an open object is refused, and
  a closed one without properties admits only ``{}``. A prefilled ``{`` is refused by
  Claude 4.6 models; Anthropic's migration guide names system prompt instructions as
  the alternative. So :data:`JSON_OBJECT_INSTRUCTION` is appended to the system
  prompt, after the client's own system text. The answer is JSON by instruction, not
  by constraint; a client that needs the guarantee sends ``json_schema``.
"""

from __future__ import annotations

from typing import Any, Final

from msgspec import UNSET, UnsetType

from sluice.errors import InvalidRequestError
from sluice.providers.anthropic.request_wire import OutputConfig, OutputFormat
from sluice.wire.chat import ChatRequest, JsonSchemaFormat, ResponseFormat

JSON_OBJECT_INSTRUCTION: Final = (
    "Write your text answer as one JSON object and nothing else: no words before or "
    "after it and no Markdown code fence around it."
)
"""What ``response_format: {"type": "json_object"}`` adds to the system prompt."""

_SCHEMA_MAPS: Final = ("properties", "patternProperties", "$defs", "definitions")
"""Keywords whose value maps names to subschemas."""
_SCHEMA_LISTS: Final = ("anyOf", "allOf", "oneOf", "prefixItems")
"""Keywords whose value is a list of subschemas."""
_SCHEMA_VALUES: Final = ("items", "additionalProperties", "not", "contains", "if", "then", "else")
"""Keywords whose value is one subschema (``items`` may also be a list of them)."""


def wants_json_object(req: ChatRequest) -> bool:
    fmt = req.response_format
    return isinstance(fmt, ResponseFormat) and fmt.type == "json_object"


def requested_schema(
    fmt: ResponseFormat | UnsetType | None,
) -> tuple[JsonSchemaFormat, dict[str, Any]] | None:
    """The ``json_schema`` format asked for and its schema, closed (None for any other
    format); a ``json_schema`` without a schema is refused."""
    if not isinstance(fmt, ResponseFormat) or fmt.type != "json_schema":
        return None
    spec = fmt.json_schema
    if not isinstance(spec, JsonSchemaFormat) or not isinstance(spec.schema, dict):
        raise InvalidRequestError(
            "response_format json_schema needs a schema.",
            param="response_format.json_schema.schema",
        )
    return spec, closed_schema(spec.schema)


def anthropic_output_config(fmt: ResponseFormat | UnsetType | None) -> OutputConfig | UnsetType:
    """``output_config`` for a ``json_schema`` format. Anthropic's format has no name or
    description: the description becomes the schema's top-level one when it has none,
    the name is not sent."""
    asked = requested_schema(fmt)
    if asked is None:
        return UNSET
    spec, schema = asked
    description = spec.description
    if isinstance(description, str) and description and "description" not in schema:
        schema["description"] = description
    return OutputConfig(OutputFormat(schema))


def closed_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``schema`` in which every object schema that leaves
    ``additionalProperties`` unsaid says ``false``; the argument is not changed."""
    closed = {key: _closed_keyword(key, value) for key, value in schema.items()}
    kind = schema.get("type")
    is_object = kind == "object" or (isinstance(kind, list) and "object" in kind)
    if is_object and "additionalProperties" not in schema:
        closed["additionalProperties"] = False
    return closed


def _closed_keyword(key: str, value: Any) -> Any:
    if key in _SCHEMA_MAPS and isinstance(value, dict):
        return {name: _closed(sub) for name, sub in value.items()}
    if key in _SCHEMA_LISTS and isinstance(value, list):
        return [_closed(sub) for sub in value]
    if key in _SCHEMA_VALUES:
        return [_closed(sub) for sub in value] if isinstance(value, list) else _closed(value)
    return value


def _closed(value: Any) -> Any:
    """A subschema closed; a boolean schema (or anything not an object) as given."""
    return closed_schema(value) if isinstance(value, dict) else value
