"""The "Host/path matrix" row: spellings of every protected path
(``protocol_vectors_paths``), every method, every Host, without the right key."""

from __future__ import annotations

import random

from bench.resilience.harness import Context, Gateway, Row, gateway
from bench.resilience.protocol_exchange import Answer, bounded, call, chat_body, send
from bench.resilience.protocol_support import (
    ADMIN_KEY,
    ENV,
    WRONG_KEY,
    fake_upstream,
    few,
    statuses,
    table_row,
)
from bench.resilience.protocol_vectors_paths import Target, path_matrix
from tests.support.gateway import openai_connection_toml

_PROTECTED_MARKS = (
    b'"object":"list"',
    b"test/gpt-fake",
    b"# HELP",
    b"sluice_",
    b'"account_id"',
    b'"balance"',
    b'"prefix"',
    b"chat.completion",
)


def _leaks(answer: Answer) -> bool:
    status = answer.status or 0
    return 200 <= status < 300 or any(mark in answer.body for mark in _PROTECTED_MARKS)


async def _probe(gw: Gateway, t: Target) -> Answer:
    host = f"Host: {t.host}\r\n" if t.host is not None else ""
    body = chat_body("matrix") if t.method == "POST" else b""
    head = (
        f"{t.method} {t.target} HTTP/1.1\r\n{host}{t.auth}Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    return await send(gw.host, gw.port, head, body, head_only=t.method == "HEAD")


async def host_path_matrix(ctx: Context) -> list[Row]:
    """Spellings of every protected path, every method, every Host, without the right key."""
    fake = await fake_upstream()
    config = openai_connection_toml(fake.base_url)
    try:
        async with gateway(ctx, config, name="matrix", env=ENV) as gw:
            first = await call(gw, "POST", "/v1/chat/completions", gw.key, chat_body("row"))
            request_id = first.headers.get("x-request-id", "req_missing")
            await call(gw, "POST", "/admin/accounts", ADMIN_KEY, b'{"name":"victim","credits":"1"}')
            await call(gw, "GET", f"/v1/requests/{request_id}", gw.key)  # written by now
            protected = [
                "/v1/models",
                "/metrics",
                f"/v1/requests/{request_id}",
                "/admin/accounts/victim",
                "/admin/accounts/victim/keys",
                "/v1/chat/completions",
            ]
            targets = path_matrix(protected, gw.key, ADMIN_KEY, WRONG_KEY)
            total, spellings = len(targets), len({t.target for t in targets})
            if ctx.tier == "fast":
                targets = random.Random(ctx.seed).sample(targets, 320)
            upstream_before = len(fake.requests)
            answers = await bounded(_probe(gw, t) for t in targets)
            reached = len(fake.requests) - upstream_before
            log = gw.log_text()
    finally:
        await fake.close()
    leaks = [
        f"{t.method} {t.target[:60]} ({t.auth_name}) -> {a.status}"
        for t, a in zip(targets, answers, strict=True)
        if _leaks(a)
    ]
    errors = [
        f"{t.method} {t.target[:60]} -> {a.status or a.error}"
        for t, a in zip(targets, answers, strict=True)
        if a.status is None or a.status >= 500
    ]
    figure = (
        f"{len(targets)} requests (of {total}: {len(protected)} protected paths in "
        f"{spellings} spellings, GET/HEAD/POST/OPTIONS/TRACE, no key / a wrong key / garbage / "
        f"Basic / the key in the query / X-Api-Key / the other key, 10 Host values): by "
        f"status {statuses(answers)}; {len(leaks)} returned protected data; {reached} "
        f"reached the upstream"
    )
    if leaks:
        figure += f". Leaks: {few(leaks, 4)}"
    if errors:
        figure += f". 5xx or no answer: {few(errors, 4)}"
    ok = not leaks and not errors and reached == 0 and "Traceback" not in log
    return [
        table_row(
            "Host/path matrix",
            figure,
            "0 answers with protected data without the right key (no 2xx: no model list, "
            "request row, metrics or admin data), 0 5xx, nothing reaches the upstream",
            ok,
        )
    ]
