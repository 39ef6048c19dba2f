"""``GET /openapi.json``: OpenAPI 3.1 for the gateway's endpoints, built from the table
of :mod:`~sluice.server.openapi_paths` and the msgspec types the code decodes and
encodes (``msgspec.json.schema_components``), so the description cannot drift from the
wire; answers the code builds as dicts, and one event of each streamed answer, are
described in :mod:`~sluice.server.openapi_answers`. ``tests/server/test_schemathesis.py``
runs every operation against the served document and checks each answer against it.

A streamed answer is ``text/event-stream`` whose ``schema`` is that of one event
(``event`` and ``data``, the data's JSON in ``contentSchema``), as OpenAPI 3.1 tools read
it. Errors are the chat wire's ``{"error": {...}}``, or on the Messages paths that wire's
``{"type": "error", "error": {...}}`` (:mod:`sluice.wire.errors`), under each status the
endpoint answers; a ``5XX`` (the gateway or the upstream failed) is always possible.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any, Final

import msgspec

from sluice import __version__
from sluice.server.openapi_answers import REF_TEMPLATE, STREAMED_TYPES, ref
from sluice.server.openapi_paths import ENDPOINTS, EXPORTS, Endpoint, Param
from sluice.wire.errors import ErrorEnvelope
from sluice.wire.messages import ErrorEvent

OPENAPI_PATH = "/openapi.json"


_REASONS: Final = MappingProxyType({
    "200": "OK", "201": "Created", "400": "The request is malformed or a parameter is invalid",
    "401": "No key, or not a valid one", "402": "The credits or budget do not cover it",
    "403": "The key may not do this", "404": "Not found (an admin path: or the admin API is off)",
    "409": "It conflicts with what is stored: the name or id is taken, or the prefix names "
    "several live keys", "410": "Gone: a resumable stream past its retention or its buffer",
    "413": "The body is too large", "422": "The config file was refused",
    "429": "Rate limited",
    "503": "Not ready", "5XX": "The gateway or the upstream failed",
})  # fmt: skip


def openapi_document() -> dict[str, Any]:
    types: list[Any] = [t for e in ENDPOINTS for t in (e.body, e.answer) if t is not None]
    types += [ErrorEnvelope, ErrorEvent, *STREAMED_TYPES]
    _, components = msgspec.json.schema_components(types, ref_template=REF_TEMPLATE)
    paths: dict[str, dict[str, Any]] = {}
    for endpoint in ENDPOINTS:
        paths.setdefault(endpoint.path, {})[endpoint.method] = _operation(endpoint)
    bearer = {"type": "http", "scheme": "bearer"}
    schemes = {
        "apiKey": {**bearer, "description": "A Sluice key"},
        "adminKey": {**bearer, "description": "The admin key"},
        "messagesKey": {"type": "apiKey", "in": "header", "name": "x-api-key",
                        "description": "A Sluice key, the Messages wire's way"},
    }  # fmt: skip
    return {
        "openapi": "3.1.0",
        "info": {"title": "Sluice", "version": __version__},
        "paths": paths,
        "components": {"schemas": components, "securitySchemes": schemes},
    }


def _operation(endpoint: Endpoint) -> dict[str, Any]:
    responses = {str(status): _answer(endpoint, str(status)) for status in endpoint.ok}
    envelope = ref(ErrorEvent if endpoint.messages_wire else ErrorEnvelope)
    for status in (*map(str, endpoint.errors), "5XX"):
        responses[status] = _response(status, {"application/json": {"schema": envelope}})
    operation: dict[str, Any] = {"summary": endpoint.summary, "responses": responses}
    if endpoint.params:
        operation["parameters"] = [_parameter(param) for param in endpoint.params]
    if endpoint.body is not None:
        operation["requestBody"] = _request_body(endpoint)
    if endpoint.key:
        operation["security"] = [{scheme: []} for scheme in endpoint.key]
    return operation


def _answer(endpoint: Endpoint, status: str) -> dict[str, Any]:
    content: dict[str, Any] = {}
    if endpoint.answer is not None:
        content["application/json"] = {"schema": ref(endpoint.answer)}
    for media in endpoint.text:
        content[media] = {"schema": {"type": "string"}}
    if endpoint.stream is not None:
        content["text/event-stream"] = {"schema": endpoint.stream()}
    answer = _response(status, content)
    if set(endpoint.text) & set(EXPORTS):
        cursor = {"schema": {"type": "string"}, "description": "An export's next page"}
        answer["headers"]["x-next-cursor"] = cursor
    return answer


def _response(status: str, content: dict[str, Any]) -> dict[str, Any]:
    request_id = {"required": True, "schema": {"type": "string"}, "description": "This "
                  "request's id, as the request log knows it"}  # fmt: skip
    headers = {"x-request-id": request_id}
    return {"description": _REASONS[status], "headers": headers, "content": content}


def _parameter(param: Param) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": param.type}
    if param.text:
        schema |= {"minLength": 1, "maxLength": 256}
    bounds = {"minimum": param.minimum, "maximum": param.maximum, "pattern": param.pattern}
    schema |= {name: value for name, value in bounds.items() if value is not None}
    if param.enum:
        schema["enum"] = list(param.enum)
    doc = {"name": param.name, "in": param.where, "required": param.required}
    doc |= {"description": param.description, "schema": schema}
    if param.literal_slashes:
        doc["x-literal-slashes"] = True
    return doc if param.example is None else doc | {"example": param.example}


def _request_body(endpoint: Endpoint) -> dict[str, Any]:
    assert endpoint.body is not None
    media: dict[str, Any] = {"schema": ref(endpoint.body)}
    if endpoint.example is not None:
        media["example"] = endpoint.example()
    return {"required": True, "content": {"application/json": media}}
