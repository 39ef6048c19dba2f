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

from sluice.server import request_list, stored_responses
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
        routed = {p for p in gw.gateway.routes.paths if not p.startswith("/console/")} - UNDESCRIBED
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
        ("/v1/responses/{response_id}", "get", "ErrorEnvelope"),
        ("/v1/responses/{response_id}", "delete", "ErrorEnvelope"),
        ("/v1/responses/{response_id}/input_items", "get", "ErrorEnvelope"),
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


STORED = "/v1/responses/{response_id}"
ITEMS = "/v1/responses/{response_id}/input_items"


@pytest.mark.parametrize(
    ("path", "method", "answer", "query"),
    [
        (STORED, "get", "Response", {"stream", "starting_after", "include"}),
        (STORED, "delete", "ResponseDeleted", set()),
        (ITEMS, "get", "InputItemPage", {"after", "limit", "order", "include"}),
    ],
)
def test_a_stored_response_is_described_under_its_id_with_its_answer(
    path: str, method: str, answer: str, query: set[str]
) -> None:
    operation = openapi_document()["paths"][path][method]
    (response_id,) = [p for p in operation["parameters"] if p["in"] == "path"]
    assert response_id["name"] == "response_id" and response_id["required"]
    assert response_id["schema"]["pattern"] == f"^{stored_responses._RESPONSE_ID.pattern}$"
    assert {p["name"] for p in operation["parameters"] if p["in"] == "query"} == query
    content = operation["responses"]["200"]["content"]
    assert content == {"application/json": {"schema": {"$ref": f"#/components/schemas/{answer}"}}}
    assert operation["security"] == [{"apiKey": []}]
    assert {"401", "404", "5XX"} <= set(operation["responses"])


def test_a_stored_responses_input_items_are_a_page_with_the_bounds_the_code_checks() -> None:
    doc = openapi_document()
    operations = doc["paths"]
    assert set(operations[STORED]) == {"get", "delete"} and set(operations[ITEMS]) == {"get"}
    query = {p["name"]: p["schema"] for p in operations[ITEMS]["get"]["parameters"]}
    assert query["limit"] == {"type": "integer", "minimum": 1, "maximum": 100}
    assert query["order"]["enum"] == ["asc", "desc"]
    stored = {p["name"]: p["schema"] for p in operations[STORED]["get"]["parameters"]}
    assert stored["stream"]["enum"] == ["false", "true"]  # true: a background one again
    cancel = operations[STORED + "/cancel"]["post"]
    assert {"400", "404", "409"} <= set(cancel["responses"])
    schemas = doc["components"]["schemas"]
    page = schemas["InputItemPage"]
    assert set(page["required"]) == {"object", "data", "first_id", "last_id", "has_more"}
    assert page["properties"]["object"] == {"enum": ["list"]}
    assert page["properties"]["data"]["items"] == {"$ref": "#/components/schemas/ListedItem"}
    assert {"id", "type"} <= set(schemas["ListedItem"]["required"])
    deleted = schemas["ResponseDeleted"]
    assert deleted["properties"]["object"] == {"enum": ["response.deleted"]}
    assert deleted["properties"]["deleted"] == {"enum": [True]}


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
