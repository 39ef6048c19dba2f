"""``response_format`` on Bedrock's Converse: the exact bodies, and botocore's own
serializer making the same body of the same parameters."""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.loaders import create_loader
from botocore.model import ServiceModel
from botocore.serialize import create_serializer

from sluice.errors import InvalidRequestError
from sluice.frontdoors.chat import decode_chat_request
from sluice.providers.anthropic.structured import JSON_OBJECT_INSTRUCTION
from sluice.providers.bedrock.request import converse_body

CLAUDE = "anthropic.claude-test-v1:0"
USER = {"role": "user", "content": "hi"}
HEAD = b'{"messages":[{"role":"user","content":[{"text":"hi"}]}]'
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "tags": {"type": "array", "items": {}}},
    "required": ["city"],
}
SCHEMA_CLOSED = (
    '{"type":"object","properties":{"city":{"type":"string"},"tags":{"type":"array",'
    '"items":{}}},"required":["city"],"additionalProperties":false}'
)


def compact(doc: Any) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode()


def sent(fields: dict[str, Any], messages: list[Any] | None = None) -> bytes:
    chat = {"model": "m", "messages": messages or [USER], **fields}
    return converse_body(decode_chat_request(json.dumps(chat).encode()), CLAUDE)


def botocore_body(body: bytes) -> Any:
    """What botocore sends for ``converse(modelId=…, **body)``, after validating the
    parameters against the Converse model it ships."""
    service = ServiceModel(create_loader().load_service_model("bedrock-runtime", "service-2"))
    request = create_serializer(service.metadata["protocol"]).serialize_to_request(
        {"modelId": CLAUDE, **json.loads(body)}, service.operation_model("Converse")
    )
    return json.loads(request["body"])


def test_json_schema_becomes_the_text_format_with_name_description_and_closed_objects() -> None:
    spec = {"name": "weather_report", "description": "Per city.", "schema": SCHEMA, "strict": True}
    body = sent({"response_format": {"type": "json_schema", "json_schema": spec}})
    definition = {"schema": SCHEMA_CLOSED, "name": "weather_report", "description": "Per city."}
    structure = {"type": "json_schema", "structure": {"jsonSchema": definition}}
    assert body == HEAD + b',"outputConfig":' + compact({"textFormat": structure}) + b"}"


@pytest.mark.parametrize("strict", [True, False, None])
def test_strict_or_not_the_same_text_format(strict: bool | None) -> None:
    """Converse's text format is always enforced; it has no ``strict`` to carry."""
    spec = {"name": "r", "schema": SCHEMA, "strict": strict}
    doc = json.loads(sent({"response_format": {"type": "json_schema", "json_schema": spec}}))
    definition = {"schema": SCHEMA_CLOSED, "name": "r"}
    assert doc["outputConfig"]["textFormat"]["structure"] == {"jsonSchema": definition}


def test_an_empty_name_is_left_out() -> None:
    spec = {"name": "", "schema": SCHEMA}
    doc = json.loads(sent({"response_format": {"type": "json_schema", "json_schema": spec}}))
    assert doc["outputConfig"]["textFormat"]["structure"] == {
        "jsonSchema": {"schema": SCHEMA_CLOSED}
    }


def test_json_schema_without_schema_is_refused() -> None:
    with pytest.raises(InvalidRequestError) as info:
        sent({"response_format": {"type": "json_schema", "json_schema": {"name": "r"}}})
    assert info.value.param == "response_format.json_schema.schema"


def test_json_object_becomes_an_instruction_in_the_system_prompt() -> None:
    body = sent({"response_format": {"type": "json_object"}})
    assert body == HEAD + b',"system":' + compact([{"text": JSON_OBJECT_INSTRUCTION}]) + b"}"


def test_the_instruction_follows_the_clients_system_blocks() -> None:
    system = {
        "role": "system",
        "content": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
    }
    doc = json.loads(sent({"response_format": {"type": "json_object"}}, [system, USER]))
    assert doc["system"] == [
        {"text": "Be brief."},
        {"cachePoint": {"type": "default"}},
        {"text": JSON_OBJECT_INSTRUCTION},
    ]
    assert "outputConfig" not in doc


def test_a_text_format_sends_nothing() -> None:
    assert sent({"response_format": {"type": "text"}}) == HEAD + b"}"


@pytest.mark.parametrize(
    "fmt",
    [
        {"type": "json_object"},
        {
            "type": "json_schema",
            "json_schema": {"name": "r", "description": "d", "schema": SCHEMA},
        },
    ],
    ids=["json_object", "json_schema"],
)
def test_botocore_validates_and_serializes_the_same_body(fmt: dict[str, Any]) -> None:
    ours = sent({"response_format": fmt}, [{"role": "system", "content": "Be brief."}, USER])
    assert botocore_body(ours) == json.loads(ours)
