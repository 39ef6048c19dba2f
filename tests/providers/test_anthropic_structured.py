"""``response_format`` on an Anthropic upstream: the exact bodies, the closing of a
schema's objects, and the official SDK sending the same bodies for the same asks."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from anthropic import AsyncAnthropic, transform_schema
from anthropic.types import MessageParam

from sluice.errors import InvalidRequestError
from sluice.frontdoors.chat import decode_chat_request
from sluice.providers.anthropic import AnthropicAdapter
from sluice.providers.anthropic.structured import JSON_OBJECT_INSTRUCTION, closed_schema
from tests.providers.test_anthropic_request import TARGET, USER
from tests.support.fake_anthropic import message
from tests.support.fake_upstream import FakeUpstream, Reply
from tests.support.gateway import counting_ids

DAY: dict[str, Any] = {
    "type": "object",
    "properties": {"high": {"type": "number"}, "sky": {"enum": ["sun", "rain"]}},
    "required": ["high", "sky"],
}
REPORT: dict[str, Any] = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "array", "items": DAY}},
    "required": ["city", "days"],
}
REPORT_CLOSED: dict[str, Any] = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "days": {"type": "array", "items": {**DAY, "additionalProperties": False}},
    },
    "required": ["city", "days"],
    "additionalProperties": False,
}
HEAD = b'{"model":"claude-sonnet-4-5","max_tokens":4096,"messages":[{"role":"user","content":"hi"}]'


def compact(doc: Any) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode()


def sent(fields: dict[str, Any], messages: list[Any] | None = None) -> bytes:
    """The exact body the adapter sends upstream for a chat request with ``fields``."""
    chat = {"model": "anthropic/claude-sonnet-4-5", "messages": messages or [USER], **fields}
    req = decode_chat_request(json.dumps(chat).encode())
    return AnthropicAdapter("anthropic", counting_ids()).build_request(req, TARGET).body


def schema_format(schema: dict[str, Any], **spec: Any) -> dict[str, Any]:
    spec = {"name": "weather_report", "schema": schema, **spec}
    return {"type": "json_schema", "json_schema": spec}


def test_json_schema_is_sent_as_a_structured_output_with_its_objects_closed() -> None:
    body = sent({"response_format": schema_format(REPORT)})
    output = {"format": {"type": "json_schema", "schema": REPORT_CLOSED}}
    assert body == HEAD + b',"output_config":' + compact(output) + b"}"


@pytest.mark.parametrize("strict", [True, False, None, "unset"])
def test_strict_or_not_the_answer_is_constrained(strict: bool | str | None) -> None:
    """Anthropic's format has only the constrained form: ``strict`` changes nothing."""
    spec = {} if strict == "unset" else {"strict": strict}
    body = json.loads(sent({"response_format": schema_format(REPORT, **spec)}))
    assert body["output_config"] == {"format": {"type": "json_schema", "schema": REPORT_CLOSED}}


def test_the_description_becomes_the_schemas_own_and_the_name_is_not_sent() -> None:
    fmt = schema_format(REPORT, description="A forecast per day.")
    body = sent({"response_format": fmt})
    schema = {**REPORT_CLOSED, "description": "A forecast per day."}
    assert json.loads(body)["output_config"]["format"]["schema"] == schema
    assert b"weather_report" not in body


def test_a_schema_with_a_description_keeps_its_own() -> None:
    own = {**REPORT, "description": "The schema's words."}
    body = json.loads(sent({"response_format": schema_format(own, description="Other words.")}))
    assert body["output_config"]["format"]["schema"]["description"] == "The schema's words."


def test_json_schema_without_schema_is_refused() -> None:
    fmt = {"type": "json_schema", "json_schema": {"name": "answer"}}
    with pytest.raises(InvalidRequestError) as info:
        sent({"response_format": fmt})
    assert info.value.param == "response_format.json_schema.schema"


def test_json_object_becomes_an_instruction_in_the_system_prompt() -> None:
    body = sent({"response_format": {"type": "json_object"}})
    assert body == HEAD + b',"system":' + compact(JSON_OBJECT_INSTRUCTION) + b"}"


@pytest.mark.parametrize(
    ("system", "expected"),
    [
        ("Be brief.", f"Be brief.\n\n{JSON_OBJECT_INSTRUCTION}"),
        (
            [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
            [
                {"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}},
                {"type": "text", "text": JSON_OBJECT_INSTRUCTION},
            ],
        ),
    ],
    ids=["after-a-system-string", "after-cached-system-blocks"],
)
def test_the_instruction_follows_the_clients_system_text(system: Any, expected: Any) -> None:
    messages = [{"role": "system", "content": system}, USER]
    body = json.loads(sent({"response_format": {"type": "json_object"}}, messages))
    assert body["system"] == expected
    assert "output_config" not in body


def test_the_instruction_is_counted_as_it_is_sent() -> None:
    chat = {"model": "m", "messages": [USER], "response_format": {"type": "json_object"}}
    req = decode_chat_request(json.dumps(chat).encode())
    up = AnthropicAdapter("anthropic", counting_ids()).count_request(req, TARGET)
    assert json.loads(up.body)["system"] == JSON_OBJECT_INSTRUCTION


def test_a_text_format_sends_nothing() -> None:
    assert sent({"response_format": {"type": "text"}}) == HEAD + b"}"


OBJ = {"type": "object", "properties": {"x": {"type": "string"}}}
SHUT = {**OBJ, "additionalProperties": False}


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        (OBJ, SHUT),
        ({"type": "object"}, {"type": "object", "additionalProperties": False}),
        ({"type": ["object", "null"]}, {"type": ["object", "null"], "additionalProperties": False}),
        ({**OBJ, "additionalProperties": True}, {**OBJ, "additionalProperties": True}),
        (
            {"type": "object", "additionalProperties": OBJ},
            {"type": "object", "additionalProperties": SHUT},
        ),
        ({"type": "string", "format": "date"}, {"type": "string", "format": "date"}),
        ({"type": "array", "items": OBJ}, {"type": "array", "items": SHUT}),
        ({"type": "array", "items": True}, {"type": "array", "items": True}),
        ({"prefixItems": [OBJ], "items": [OBJ]}, {"prefixItems": [SHUT], "items": [SHUT]}),
        (
            {"anyOf": [OBJ, {"type": "null"}], "allOf": [OBJ], "oneOf": [OBJ]},
            {"anyOf": [SHUT, {"type": "null"}], "allOf": [SHUT], "oneOf": [SHUT]},
        ),
        (
            {"$defs": {"A": OBJ}, "definitions": {"B": OBJ}, "$ref": "#/$defs/A"},
            {"$defs": {"A": SHUT}, "definitions": {"B": SHUT}, "$ref": "#/$defs/A"},
        ),
        (
            {"not": OBJ, "if": OBJ, "then": OBJ, "else": OBJ, "contains": OBJ},
            {"not": SHUT, "if": SHUT, "then": SHUT, "else": SHUT, "contains": SHUT},
        ),
        (
            {"type": "object", "patternProperties": {"^x": OBJ}},
            {"type": "object", "patternProperties": {"^x": SHUT}, "additionalProperties": False},
        ),
        (
            {"enum": [OBJ], "const": OBJ, "default": OBJ, "examples": [OBJ]},
            {"enum": [OBJ], "const": OBJ, "default": OBJ, "examples": [OBJ]},
        ),
    ],
    ids=[
        "object",
        "object-without-properties",
        "nullable-object",
        "explicit-true-kept",
        "map-kept-its-value-closed",
        "not-an-object",
        "items",
        "boolean-items",
        "tuple-items",
        "combinators",
        "definitions",
        "conditionals",
        "pattern-properties",
        "data-is-not-a-schema",
    ],
)
def test_closed_schema(schema: dict[str, Any], expected: dict[str, Any]) -> None:
    assert closed_schema(schema) == expected


def test_closing_leaves_the_clients_schema_as_it_was() -> None:
    schema = copy.deepcopy(REPORT)
    closed_schema(schema)
    assert schema == REPORT


def test_closing_agrees_with_the_official_sdks_transform() -> None:
    """Within the subset Anthropic supports (every object listing its properties), the
    SDK's ``transform_schema`` makes the same schema of it."""
    schema = {
        "$defs": {"Day": DAY},
        "type": "object",
        "description": "A forecast.",
        "properties": {
            "city": {"type": "string"},
            "when": {"type": "string", "format": "date-time"},
            "days": {"type": "array", "items": {"$ref": "#/$defs/Day"}},
            "alert": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        },
        "required": ["city", "days"],
    }
    assert closed_schema(schema) == transform_schema(schema)


async def test_the_official_sdk_sends_the_same_bodies(fake: FakeUpstream) -> None:
    """The SDK's typed parameters for a schema and for a system prompt ending in the
    instruction (checked by mypy) make the bodies we build for the same asks."""
    for _ in range(2):
        fake.queue(Reply.json(message([{"type": "text", "text": "{}"}])))
    hi: list[MessageParam] = [{"role": "user", "content": "hi"}]
    async with AsyncAnthropic(base_url=fake.root_url, api_key="k", max_retries=0) as sdk:
        await sdk.messages.create(
            model="claude-sonnet-4-5",
            max_tokens=4096,
            messages=hi,
            output_config={"format": {"type": "json_schema", "schema": REPORT_CLOSED}},
        )
        await sdk.messages.create(
            model="claude-sonnet-4-5",
            max_tokens=4096,
            messages=hi,
            system=f"Be brief.\n\n{JSON_OBJECT_INSTRUCTION}",
        )
    json_mode = {"response_format": {"type": "json_object"}}
    ours = [
        sent({"response_format": schema_format(REPORT)}),
        sent(json_mode, [{"role": "system", "content": "Be brief."}, USER]),
    ]
    assert [r.json() for r in fake.requests] == [json.loads(body) for body in ours]


def test_the_providers_page_quotes_the_instruction() -> None:
    page = (Path(__file__).parents[2] / "docs" / "providers.md").read_text()
    assert JSON_OBJECT_INSTRUCTION in " ".join(page.split())
