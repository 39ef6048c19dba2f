"""``GET /openapi.json``: OpenAPI 3.1 generated from the wire types, covering every
endpoint the gateway routes, every reference resolving, and real answers carrying
what their schemas require."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sluice.server import request_list
from sluice.server.openapi import openapi_document
from sluice.server.pages import MAX_LIMIT
from sluice.storage.spend import SPEND_BY
from tests.support.gateway import running_gateway
from tests.support.raw_http import exchange, get, post

UNDESCRIBED = {"/health", "/openapi.json"}
"""Routes the document leaves out: the legacy probe and the document itself (and the
console's static files, under ``/console/``)."""


def refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref":
                yield value
            else:
                yield from refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from refs(value)


async def test_the_document_describes_every_route_and_every_reference_resolves(
    tmp_path: Path,
) -> None:
    async with running_gateway(tmp_path) as gw:
        answer = await exchange(gw.host, gw.port, get("/openapi.json", None))
        routed = {p for p in gw.gateway._routes if not p.startswith("/console/")} - UNDESCRIBED
        assert gw.dev_key is not None
        body = {
            "model": "sluice/demo",
            "max_tokens": 5,
            "messages": [{"role": "user", "content": "hi"}],
        }
        chat = await exchange(
            gw.host,
            gw.port,
            post("/v1/chat/completions", json.dumps(body).encode(), gw.dev_key.key),
        )
        models = await exchange(gw.host, gw.port, get("/v1/models", gw.dev_key.key))
    doc = answer.json()
    assert answer.status == 200 and doc["openapi"] == "3.1.0"
    assert routed <= set(doc["paths"]), routed - set(doc["paths"])
    schemas = doc["components"]["schemas"]
    for ref in set(refs(doc)):
        assert ref.removeprefix("#/components/schemas/") in schemas, ref
    for real, name in ((chat.json(), "ChatCompletion"), (models.json(), "ModelList")):
        assert set(schemas[name]["required"]) <= set(real), name
    operation = doc["paths"]["/v1/messages"]["post"]
    assert set(operation["responses"]["200"]["content"]) == {
        "application/json",
        "text/event-stream",
    }
    assert doc["paths"]["/health/ready"]["get"].get("security") is None
    assert doc["paths"]["/admin/spend"]["get"]["security"] == [{"adminKey": []}]


def test_every_path_parameter_is_declared_and_every_answer_is_typed() -> None:
    doc = openapi_document()
    for path, methods in doc["paths"].items():
        for method, operation in methods.items():
            declared = {p["name"] for p in operation.get("parameters", ()) if p["in"] == "path"}
            assert declared == set(re.findall(r"\{(\w+)\}", path)), (method, path)
            for status, answer in operation["responses"].items():
                for media, content in answer.get("content", {}).items():
                    assert content["schema"] != {"type": "object"}, (method, path, status, media)


@pytest.mark.parametrize(
    ("path", "method", "envelope"),
    [
        ("/v1/chat/completions", "post", "ErrorEnvelope"),
        ("/v1/messages", "post", "ErrorEvent"),
        ("/v1/messages/count_tokens", "post", "ErrorEvent"),
        ("/admin/spend", "get", "ErrorEnvelope"),
    ],
)
def test_errors_are_each_wires_envelope_under_their_statuses(
    path: str, method: str, envelope: str
) -> None:
    responses = openapi_document()["paths"][path][method]["responses"]
    assert "default" not in responses and "5XX" in responses
    errors = [r for status, r in responses.items() if status[0] in "45"]
    assert len(errors) >= 3
    for answer in errors:
        ref = answer["content"]["application/json"]["schema"]["$ref"]
        assert ref == f"#/components/schemas/{envelope}"


def test_listings_declare_their_query_parameters_with_the_bounds_the_code_checks() -> None:
    paths = openapi_document()["paths"]
    spend = {p["name"]: p for p in paths["/v1/spend"]["get"]["parameters"]}
    assert spend["by"]["required"] and spend["by"]["schema"]["enum"] == list(SPEND_BY)
    listing = {p["name"]: p["schema"] for p in paths["/admin/requests"]["get"]["parameters"]}
    assert set(listing) == {*request_list._PARAMS, "account"}
    assert listing["limit"] == {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT}
    answer = paths["/v1/requests"]["get"]["responses"]["200"]["content"]
    assert set(answer) == {"application/json", "text/csv", "application/x-ndjson"}


@pytest.mark.parametrize(
    ("method", "path", "status", "answer"),
    [
        ("post", "/admin/accounts", "201", "AccountShown"),
        ("get", "/admin/accounts/{name}", "200", "AccountShown"),
        ("post", "/admin/accounts/{name}/credits", "200", "AccountShown"),
        ("get", "/admin/accounts/{name}/keys", "200", "KeyPage"),
        ("post", "/admin/keys/{prefix}/rotate", "200", "NewKey"),
        ("post", "/admin/keys/revoke", "200", "Revoked"),
        ("get", "/admin/accounts/{name}/connections", "200", "AccountConnections"),
        ("put", "/admin/accounts/{name}/connections/{conn_id}", "200", "ConnectionShown"),
        ("delete", "/admin/accounts/{name}/connections/{conn_id}", "200", "ConnectionDeleted"),
        ("put", "/admin/accounts/{name}/prices/{model}", "200", "PriceSet"),
        ("delete", "/admin/accounts/{name}/prices/{model}", "200", "PriceSet"),
        ("get", "/admin/connections", "200", "ConnectionList"),
    ],
)
def test_the_admin_api_is_described_with_the_admin_key_and_its_answers(
    method: str, path: str, status: str, answer: str
) -> None:
    operation = openapi_document()["paths"][path][method]
    content = operation["responses"][status]["content"]["application/json"]
    assert content["schema"] == {"$ref": f"#/components/schemas/{answer}"}
    assert operation["security"] == [{"adminKey": []}]
    assert {"401", "404", "5XX"} <= set(operation["responses"])


def test_a_model_id_in_a_path_is_described_with_its_slashes_literal() -> None:
    operations = openapi_document()["paths"]["/admin/accounts/{name}/prices/{model}"]
    for operation in operations.values():
        model = next(p for p in operation["parameters"] if p["name"] == "model")
        assert model["x-literal-slashes"] is True and "%2F" in model["description"]
