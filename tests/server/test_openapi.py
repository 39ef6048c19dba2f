"""``GET /openapi.json``: OpenAPI 3.1 generated from the wire types, covering every
endpoint the gateway routes, every reference resolving, and real answers carrying
what their schemas require."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.support.gateway import running_gateway
from tests.support.raw_http import exchange, get, post

UNDESCRIBED = {"/health", "/openapi.json"}
"""Routes the document leaves out: the legacy probe and the document itself."""


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
        routed = set(gw.gateway._routes) - UNDESCRIBED
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
