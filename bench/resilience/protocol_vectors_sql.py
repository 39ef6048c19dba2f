"""The requests of the "SQL injection in every header and id" rows: each payload in
Authorization, the request ids, the chat fields that reach storage, and every admin
path and body."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from bench.resilience.protocol_exchange import request_head
from bench.resilience.protocol_support import ADMIN_KEY

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_MODEL_NAME_MAX = 512

SQL_PAYLOADS = (
    "' OR '1'='1",
    "' OR 1=1 --",
    '"; DROP TABLE accounts; --',
    "'; DROP TABLE api_keys; --",
    "1; DELETE FROM ledger",
    "' UNION SELECT key_digest, prefix FROM api_keys --",
    "victim' --",
    "victim'/*",
    "%' OR prefix LIKE '%",
    "sk-sluice-%",
    "sk-sluice-____",
    "' OR ''='",
    "\\' OR 1=1 #",
    "'; SELECT pg_sleep(3); --",
    "' AND 1=(SELECT 1 FROM pg_sleep(3)) --",
    "' AND randomblob(500000000) --",
    "$1",
    "?",
    "%s",
    "' OR 1=1\x00",
    "\x00",
    "\u02bc OR \u02bc1\u02bc=\u02bc1",  # modifier letter apostrophe
    "\uff07 OR \uff071\uff07=\uff071",  # fullwidth apostrophe
    "\u2018 OR 1=1 --",
    "\u2019; DROP TABLE accounts; --",
    "'" * 10_000,
    "A" * 100_000,
)


@dataclass
class Probe:
    """One SQL-injection request: who it is, what answers are fine."""

    name: str
    head: bytes
    body: bytes = b""
    protected: bool = False
    """Sent with an injected key: any 2xx is an authentication bypass."""
    payload: str = ""
    request_logged: bool = False
    """A chat request that reaches routing: it leaves a request-log row."""
    creates_key: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


def _in_path(payload: str) -> str:
    """The payload as a path segment: raw where the request line allows it."""
    return quote(payload, safe="!$&'()*+,;=:@\"<>[]^`{|}\\-._~")


def probes(payload: str, key: str, request_id: str, chat_keys: tuple[str, str, str]) -> list[Probe]:
    """``chat_keys``: a key of its own for each chat probe, so that each refusal opens a
    request-log row of its own (refusals of one key, status and code share one:
    sluice.exchange.refusals)."""
    seg = _in_path(payload)
    admin = ADMIN_KEY
    body = json.dumps
    out = [
        Probe(
            f"Bearer <p> on {p}",
            request_head(m, p, None, 0, f"Authorization: Bearer {payload}\r\n"),
            protected=True,
        )
        for m, p in (
            ("GET", "/v1/models"),
            ("GET", "/metrics"),
            ("GET", f"/v1/requests/{request_id}"),
            ("POST", "/v1/chat/completions"),
            ("GET", "/admin/accounts/victim"),
        )
    ]
    out += [
        Probe(
            "Authorization: <p>",
            request_head("GET", "/v1/models", None, 0, f"Authorization: {payload}\r\n"),
            protected=True,
        ),
        Probe(
            "Bearer sk-sluice-<p>",
            request_head(
                "GET", "/v1/models", None, 0, f"Authorization: Bearer sk-sluice-{payload}\r\n"
            ),
            protected=True,
        ),
        Probe(
            "GET /v1/requests/<p>",
            request_head("GET", f"/v1/requests/{seg}", key, 0),
            payload=payload,
        ),
        Probe(
            "GET /v1/requests/req_<p>",
            request_head("GET", f"/v1/requests/req_{seg}", key, 0),
            payload=payload,
        ),
    ]
    chats = (("model", payload), ("models", [payload]), ("user", payload))
    for (chat_field, value), chat_key in zip(chats, chat_keys, strict=True):
        doc: dict[str, Any] = {
            "model": "no/such-model",
            "messages": [{"role": "user", "content": payload}],
        }
        doc[chat_field] = value
        raw = body(doc).encode()
        out.append(
            Probe(
                f"chat {chat_field}: <p>",
                request_head("POST", "/v1/chat/completions", chat_key, len(raw)),
                raw,
                payload=payload,
                # a model name with control characters or longer than the wire model
                # allows (sluice.wire.chat.ModelName) is refused as invalid, unlogged
                request_logged=chat_field == "user"
                or (not _CONTROL.search(payload) and len(payload) <= _MODEL_NAME_MAX),
                extra={"field": chat_field, "key": chat_key},
            )
        )
    admin_calls: list[tuple[str, str, str, bytes, dict[str, Any]]] = [
        ("GET /admin/accounts/<p>", "GET", f"/admin/accounts/{seg}", b"", {}),
        ("GET /admin/accounts/<p>/keys", "GET", f"/admin/accounts/{seg}/keys", b"", {}),
        (
            "GET /admin/accounts/<p>/connections",
            "GET",
            f"/admin/accounts/{seg}/connections",
            b"",
            {},
        ),
        ("POST /admin/accounts/<p>/keys", "POST", f"/admin/accounts/{seg}/keys", b"{}", {}),
        (
            "POST /admin/accounts/<p>/credits",
            "POST",
            f"/admin/accounts/{seg}/credits",
            b'{"amount":"1"}',
            {},
        ),
        (
            "PUT connection <p>",
            "PUT",
            f"/admin/accounts/victim/connections/{seg}",
            b'{"provider":"openai","models":{}}',
            {},
        ),
        ("DELETE connection <p>", "DELETE", f"/admin/accounts/victim/connections/{seg}", b"", {}),
        (
            "PUT price of model <p>",
            "PUT",
            f"/admin/accounts/victim/prices/{seg}",
            b'{"input":1,"output":1}',
            {},
        ),
        (
            "POST /admin/accounts name <p>",
            "POST",
            "/admin/accounts",
            body({"name": payload}).encode(),
            {},
        ),
        (
            "POST credits amount <p>",
            "POST",
            "/admin/accounts/victim/credits",
            body({"amount": payload}).encode(),
            {},
        ),
        (
            "revoke prefix sk-sluice-<p>",
            "POST",
            "/admin/keys/revoke",
            body({"prefix": "sk-sluice-" + payload}).encode(),
            {"revoke": True},
        ),
        (
            "revoke prefix <p>",
            "POST",
            "/admin/keys/revoke",
            body({"prefix": payload}).encode(),
            {"revoke": True},
        ),
        (
            "new key named <p>",
            "POST",
            "/admin/accounts/victim/keys",
            body({"name": payload}).encode(),
            {},
        ),
    ]
    for name, method, path, raw, extra in admin_calls:
        out.append(
            Probe(
                name,
                request_head(method, path, admin, len(raw)),
                raw,
                payload=payload,
                creates_key=name == "new key named <p>",
                extra=extra,
            )
        )
    return out
