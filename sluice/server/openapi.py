"""``GET /openapi.json``: OpenAPI 3.1 for the gateway's endpoints, generated from the
msgspec types the code decodes and encodes (``msgspec.json.schema_components``), so the
description cannot drift from the wire. Streamed answers are described as
``text/event-stream`` whose events carry the named chunk or event types."""

from __future__ import annotations

from typing import Any, Final

import msgspec

from sluice import __version__
from sluice.accounts.policy import AllowanceChanges, KeyChanges
from sluice.storage.base import RequestRecord
from sluice.wire.chat import ChatRequest
from sluice.wire.chunks import ChatCompletion, ChatCompletionChunk, ModelList
from sluice.wire.errors import ErrorEnvelope
from sluice.wire.messages import (
    CountTokens,
    CountTokensRequest,
    ErrorEvent,
    Message,
    MessageDelta,
    MessagesRequest,
    MessageStart,
)

OPENAPI_PATH = "/openapi.json"
_REF: Final = "#/components/schemas/{name}"


class Endpoint(msgspec.Struct, frozen=True):
    path: str
    method: str
    summary: str
    body: type | None = None
    answer: type | None = None
    stream: type | None = None
    """The type of the events of a streamed answer (``stream: true``)."""
    key: str = "apiKey"
    """``apiKey``, ``adminKey`` or ``none``."""


ENDPOINTS: Final = (
    Endpoint("/v1/chat/completions", "post", "A chat completion, streamed or whole",
             ChatRequest, ChatCompletion, ChatCompletionChunk),
    Endpoint("/v1/messages", "post", "A message, streamed or whole (the Messages wire)",
             MessagesRequest, Message, MessageStart),
    Endpoint("/v1/messages/count_tokens", "post", "Input tokens of a Messages prompt",
             CountTokensRequest, CountTokens),
    Endpoint("/v1/models", "get", "The models and routes this key may ask for", answer=ModelList),
    Endpoint("/v1/requests", "get", "This account's request log, newest first (a page)"),
    Endpoint("/v1/requests/{id}", "get", "One request of this account", answer=RequestRecord),
    Endpoint("/v1/spend", "get", "This account's spend, grouped by key, model, provider or day"),
    Endpoint("/health/live", "get", "The process answers", key="none"),
    Endpoint("/health/ready", "get", "Storage and the rate limiter answer (503 otherwise)",
             key="none"),
    Endpoint("/metrics", "get", "Prometheus metrics (operators)", key="adminKey"),
    Endpoint("/admin/accounts", "get", "A page of accounts", key="adminKey"),
    Endpoint("/admin/accounts/{name}", "patch", "Change an account's budget and limits",
             AllowanceChanges, key="adminKey"),
    Endpoint("/admin/accounts/{name}/keys", "post", "Make a key (its secret is shown once)",
             KeyChanges, key="adminKey"),
    Endpoint("/admin/keys/{prefix}", "patch", "Change a key's policy", KeyChanges,
             key="adminKey"),
    Endpoint("/admin/requests", "get", "Every account's request log (a page)", key="adminKey"),
    Endpoint("/admin/spend", "get", "Spend of every account or one", key="adminKey"),
    Endpoint("/admin/reload", "post", "Read the config file again", key="adminKey"),
)  # fmt: skip
"""What the document describes (the admin API in full is in docs/admin.md)."""


def openapi_document() -> dict[str, Any]:
    types = [t for e in ENDPOINTS for t in (e.body, e.answer, e.stream) if t is not None]
    types += [ErrorEnvelope, ErrorEvent, MessageDelta]
    _, components = msgspec.json.schema_components(types, ref_template=_REF)
    paths: dict[str, dict[str, Any]] = {}
    for endpoint in ENDPOINTS:
        paths.setdefault(endpoint.path, {})[endpoint.method] = _operation(endpoint)
    return {
        "openapi": "3.1.0",
        "info": {"title": "Sluice", "version": __version__},
        "paths": paths,
        "components": {
            "schemas": components,
            "securitySchemes": {
                "apiKey": {"type": "http", "scheme": "bearer", "description": "A Sluice key"},
                "adminKey": {"type": "http", "scheme": "bearer", "description": "The admin key"},
            },
        },
    }


def _ref(kind: type) -> dict[str, str]:
    name = kind.__name__
    return {"$ref": _REF.format(name=name)}


def _operation(endpoint: Endpoint) -> dict[str, Any]:
    content: dict[str, Any] = {"application/json": {"schema": _answer_schema(endpoint)}}
    if endpoint.stream is not None:
        events = {"description": "Server-sent events", "x-event-schema": _ref(endpoint.stream)}
        content["text/event-stream"] = {"schema": {"type": "string"}, **events}
    operation: dict[str, Any] = {
        "summary": endpoint.summary,
        "responses": {
            "200": {"description": "OK", "content": content},
            "default": {
                "description": "An error",
                "content": {"application/json": {"schema": _ref(ErrorEnvelope)}},
            },
        },
    }
    if endpoint.body is not None:
        operation["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": _ref(endpoint.body)}},
        }
    if endpoint.key != "none":
        operation["security"] = [{endpoint.key: []}]
    return operation


def _answer_schema(endpoint: Endpoint) -> dict[str, Any]:
    return {"type": "object"} if endpoint.answer is None else _ref(endpoint.answer)
