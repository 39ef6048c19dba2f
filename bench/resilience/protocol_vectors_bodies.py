"""The hostile bodies of the "hostile bodies" row, to POST /v1/chat/completions: nested
deep, too large, invalid UTF-8, out-of-range numbers, wrong types, overrides of the
connection; and bodies accepted by design, whose forwarded re-encoding is judged."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bench.resilience.harness import MIB

MAX_BODY = 16 * MIB
"""The gateway's default ``max_body_bytes``."""
DEEP = 100_000


@dataclass
class Body:
    name: str
    method: str
    path: str
    body: bytes
    refuse: bool = True
    """False: accepted by design (then ``forwarded`` judges what reached the upstream)."""
    status: int | None = None
    param: str | None = None
    forwarded: Callable[[bytes], bool] | None = None
    chunked: bool = False
    oversize: int = 0
    """Send a head declaring this many body bytes (or stream that many, chunked)."""
    marker: str = ""


def _pairs(body: bytes) -> list[tuple[str, Any]]:
    return json.loads(body, object_pairs_hook=lambda pairs: pairs)  # type: ignore[no-any-return]


def _no_duplicate_keys(body: bytes) -> bool:
    def walk(value: Any) -> bool:
        if isinstance(value, list) and value and all(isinstance(p, tuple) for p in value):
            names = [p[0] for p in value]
            return len(names) == len(set(names)) and all(walk(p[1]) for p in value)
        if isinstance(value, list):
            return all(walk(v) for v in value)
        return True

    return walk(_pairs(body))


def chat_bodies() -> list[Body]:
    base = b'{"model":"test/gpt-fake","messages":[{"role":"user","content":"hi"}]'
    deep_arr = b"[" * DEEP + b"]" * DEEP
    deep_obj = b'{"a":' * DEEP + b"1" + b"}" * DEEP
    big = b"1" + b"0" * 400
    path = "/v1/chat/completions"

    def with_(extra: bytes) -> bytes:
        return base + b"," + extra + b"}"

    def msgs(n: int, last: dict[str, Any] | None = None) -> bytes:
        items: list[dict[str, Any]] = [{"role": "user", "content": "x"}] * n
        if last is not None:
            items[-1] = last
        return json.dumps({"model": "test/gpt-fake", "messages": items}).encode()

    def part(kind: str, value: bytes) -> bytes:
        return (
            b'{"model":"test/gpt-fake","messages":[{"role":"user","content":' + value + b"}]}"
            if kind == "content"
            else value
        )

    out = [
        Body("arrays nested 100,000 deep", "POST", path, deep_arr),
        Body("objects nested 100,000 deep", "POST", path, deep_obj),
        Body("100,000 deep in metadata", "POST", path, with_(b'"metadata":' + deep_obj)),
        Body("100,000 deep in tools", "POST", path, with_(b'"tools":[' + deep_arr + b"]")),
        Body(
            "100,000 deep in a tool's parameters",
            "POST",
            path,
            with_(
                b'"tools":[{"type":"function","function":{"name":"f","parameters":'
                + deep_obj
                + b"}}]"
            ),
        ),
        Body("100,000 deep in message content", "POST", path, part("content", deep_arr)),
        Body(
            "content parts nested deep",
            "POST",
            path,
            part("content", b'[{"type":"text","text":' + b"[" * 200 + b'"x"' + b"]" * 200 + b"}]"),
        ),
        Body(
            "65 levels: one past max_json_depth",
            "POST",
            path,
            with_(b'"metadata":' + b"[" * 64 + b"]" * 64),
        ),
        Body(
            "16 MiB + 1 byte (Content-Length)", "POST", path, b"", status=413, oversize=MAX_BODY + 1
        ),
        Body(
            "16 MiB + 1 byte (chunked)",
            "POST",
            path,
            b"",
            status=413,
            oversize=MAX_BODY + 1,
            chunked=True,
        ),
        Body("invalid UTF-8 in a string", "POST", path, part("content", b'"\xff\xfe\xc3\x28"')),
        # an unknown field is kept as sent for a connection that allows it (docs/api.md,
        # "Any other top-level field"): its name and its value must be text
        Body("invalid UTF-8 in a key", "POST", path, with_(b'"\xff":1')),
        Body(
            "invalid UTF-8 in an unknown field's value",
            "POST",
            path,
            with_(b'"zzz":"\xff\xfe"'),
            param="zzz",
        ),
        Body("a raw NUL in a string", "POST", path, part("content", b'"a\x00b"')),
        Body("a lone surrogate escape", "POST", path, part("content", b'"\\ud800"')),
        Body(
            "temperature: 1e999", "POST", path, with_(b'"temperature":1e999'), param="temperature"
        ),
        Body(
            "max_tokens: 10**400", "POST", path, with_(b'"max_tokens":' + big), param="max_tokens"
        ),
        Body(
            "max_tokens: -10**400", "POST", path, with_(b'"max_tokens":-' + big), param="max_tokens"
        ),
        Body("seed: 10**400", "POST", path, with_(b'"seed":' + big), param="seed"),
        Body("n: 1e999", "POST", path, with_(b'"n":1e999'), param="n"),
        Body(
            "NaN and Infinity literals", "POST", path, with_(b'"temperature":NaN,"top_p":Infinity')
        ),
        Body("an empty body", "POST", path, b""),
        Body("null", "POST", path, b"null"),
        Body("an array", "POST", path, b"[]"),
        Body("a string", "POST", path, b'"x"'),
        Body("a number", "POST", path, b"1"),
        Body("true", "POST", path, b"true"),
        Body(
            "messages: null",
            "POST",
            path,
            b'{"model":"test/gpt-fake","messages":null}',
            param="messages",
        ),
        Body(
            "messages: a string",
            "POST",
            path,
            b'{"model":"test/gpt-fake","messages":"hi"}',
            param="messages",
        ),
        Body(
            "messages: []",
            "POST",
            path,
            b'{"model":"test/gpt-fake","messages":[]}',
            param="messages",
        ),
        Body(
            "no model",
            "POST",
            path,
            b'{"messages":[{"role":"user","content":"hi"}]}',
            param="model",
        ),
        Body(
            "model: a number",
            "POST",
            path,
            b'{"model":1,"messages":[{"role":"user","content":"hi"}]}',
            param="model",
        ),
        Body(
            "model: an object",
            "POST",
            path,
            b'{"model":{"$ne":1},"messages":[{"role":"user","content":"hi"}]}',
            param="model",
        ),
        Body(
            "role: root",
            "POST",
            path,
            b'{"model":"test/gpt-fake","messages":[{"role":"root","content":"hi"}]}',
        ),
        Body("content: a number", "POST", path, part("content", b"5")),
        Body('stream: "yes"', "POST", path, with_(b'"stream":"yes"'), param="stream"),
        Body("tools: an object", "POST", path, with_(b'"tools":{}'), param="tools"),
        Body(
            "stop: 17 strings (over 16)",
            "POST",
            path,
            with_(b'"stop":' + json.dumps(["s"] * 17).encode()),
            param="stop",
        ),
        Body("n: 0", "POST", path, with_(b'"n":0'), param="n"),
        Body("10,000 messages, the last one broken", "POST", path, msgs(10_000, {"role": "user"})),
        Body(
            "a 1 MiB key of an unknown field, nested 65 deep",
            "POST",
            path,
            with_(b'"' + b"k" * MIB + b'":' + b"[" * 65 + b"]" * 65),
        ),
        Body("trailing garbage", "POST", path, base + b"}xx"),
        Body("two documents", "POST", path, base + b"}" + base + b"}"),
        Body("a UTF-8 BOM in front", "POST", path, b"\xef\xbb\xbf" + base + b"}"),
        Body("UTF-16", "POST", path, (base + b"}").decode().encode("utf-16")),
    ]
    for name in (
        "api_key", "api_base", "base_url", "api_version", "custom_llm_provider",
        "aws_access_key_id", "aws_secret_access_key", "aws_session_token", "aws_region_name",
        "vertex_credentials", "vertex_project", "vertex_location", "azure_endpoint",
        "azure_ad_token", "extra_headers",
    ):  # fmt: skip
        value = (
            b'{"authorization":"Bearer x"}' if name == "extra_headers" else b'"http://evil.example"'
        )
        out.append(
            Body(
                f"override {name}",
                "POST",
                path,
                with_(b'"' + name.encode() + b'":' + value),
                param=name,
            )
        )

    # -- accepted by design: what reaches the upstream is re-encoded from what was checked --
    def forwards(check: Callable[[dict[str, Any]], bool]) -> Callable[[bytes], bool]:
        return lambda raw: _no_duplicate_keys(raw) and check(json.loads(raw))

    out += [
        Body(
            "unknown fields (refused by name: no connection allows them)",
            "POST",
            path,
            with_(b'"zzz":1,"__proto__":{"admin":true},"constructor":{"prototype":1}'),
            param="zzz",
        ),
        Body(
            "duplicate keys (the last wins, forwarded once)",
            "POST",
            path,
            b'{"model":"nope","model":"test/gpt-fake","messages":[{"role":"user","content":"a"}],'
            b'"messages":[{"role":"user","content":"hi"}]}',
            refuse=False,
            forwarded=forwards(lambda d: d["messages"][0]["content"] == "hi"),
        ),
        Body(
            "an escaped NUL in content",
            "POST",
            path,
            part("content", b'"a\\u0000b"'),
            refuse=False,
            forwarded=forwards(lambda d: d["messages"][0]["content"] == "a\x00b"),
        ),
        Body(
            "10,000 messages",
            "POST",
            path,
            msgs(10_000),
            refuse=False,
            forwarded=forwards(lambda d: len(d["messages"]) == 10_000),
        ),
        Body(
            "2,000 content parts (the most a message may hold)",
            "POST",
            path,
            part("content", json.dumps([{"type": "text", "text": "x"}] * 2_000).encode()),
            refuse=False,
            forwarded=forwards(lambda d: len(d["messages"][0]["content"]) == 2_000),
        ),
    ]
    out += [
        Body(
            "10,000 content parts (past the 2,000 a message may hold)",
            "POST",
            path,
            part("content", json.dumps([{"type": "text", "text": "x"}] * 10_000).encode()),
            status=400,
            param="messages[0].content",
        ),
        Body(
            "100,001 JSON values (past the bound, before decoding)",
            "POST",
            path,
            part("content", json.dumps([{"type": "text", "text": "x"}] * 50_000).encode()),
            status=400,
        ),
    ]
    return out
