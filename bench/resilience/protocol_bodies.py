"""The "hostile bodies" row: bodies built to break a decoder
(``protocol_vectors_bodies``, ``protocol_vectors_admin``), each to a gateway logging at
DEBUG, with a fake upstream that records what reached it."""

from __future__ import annotations

from bench.resilience.harness import MIB, Context, Gateway, Row, gateway
from bench.resilience.protocol_exchange import Answer, call, envelope_ok, feeder, request_head, send
from bench.resilience.protocol_support import (
    ADMIN_KEY,
    ENV,
    fake_upstream,
    few,
    statuses,
    table_row,
)
from bench.resilience.protocol_vectors_admin import admin_bodies
from bench.resilience.protocol_vectors_bodies import Body, chat_bodies
from tests.support.gateway import openai_connection_toml


async def _send_body(gw: Gateway, key: str, b: Body) -> Answer:
    if b.oversize and b.chunked:
        head = request_head(b.method, b.path, key, None, "Transfer-Encoding: chunked\r\n")
        piece = b"%x\r\n%s\r\n" % (MIB, b"[" * MIB)
        parts = [piece] * (b.oversize // MIB) + [b"1\r\n[\r\n0\r\n\r\n"]
        return await send(gw.host, gw.port, head, stream=feeder(parts), wait=30)
    if b.oversize:
        head = request_head(b.method, b.path, key, b.oversize)
        return await send(gw.host, gw.port, head, b"[" * 65536, wait=30)
    return await send(
        gw.host, gw.port, request_head(b.method, b.path, key, len(b.body)), b.body, wait=30
    )


async def hostile_bodies(ctx: Context) -> list[Row]:
    """Bodies built to break a decoder, to POST /v1/chat/completions and the admin API."""
    fake = await fake_upstream()
    config = openai_connection_toml(fake.base_url)
    chat, admin = chat_bodies(), admin_bodies()
    verdicts: list[tuple[Body, Answer, bool]] = []
    try:
        async with gateway(ctx, config, name="bodies", env=ENV, log_level="DEBUG") as gw:
            await call(gw, "POST", "/admin/accounts", ADMIN_KEY, b'{"name":"victim","credits":"1"}')
            for b in [*chat, *admin]:
                key = gw.key if b.path.startswith("/v1/") else ADMIN_KEY
                before = len(fake.requests)
                answer = await _send_body(gw, key, b)
                sent = fake.requests[before:]
                if b.refuse:
                    error = (answer.json() or {}).get("error") if envelope_ok(answer) else None
                    ok = (
                        answer.status is not None
                        and 400 <= answer.status < 500
                        and error is not None
                        and (b.status is None or answer.status == b.status)
                        and (b.param is None or error["param"] == b.param)
                        and not sent
                    )
                else:
                    ok = (
                        answer.status == 200
                        and len(sent) == 1
                        and (b.forwarded is None or b.forwarded(sent[0].body))
                    )
                verdicts.append((b, answer, ok))
            tracebacks = gw.log_text().count("Traceback")
    finally:
        await fake.close()
    refused = [(b, a, ok) for b, a, ok in verdicts if b.refuse]
    accepted = [(b, a, ok) for b, a, ok in verdicts if not b.refuse]
    errors_5xx = [f"{b.name} -> {a.status}" for b, a, _ in verdicts if (a.status or 0) >= 500]
    wrong = [
        f"{b.name} -> {a.status}"
        + (f" param {(a.json() or {}).get('error', {}).get('param')!r}" if envelope_ok(a) else "")
        for b, a, ok in verdicts
        if not ok and (a.status or 0) < 500
    ]
    n_chat = sum(1 for b, _, _ in refused if b.path.startswith("/v1/"))
    figure = (
        f"{len(refused)} hostile bodies ({n_chat} to /v1/chat/completions, "
        f"{len(refused) - n_chat} to the admin API): "
        f"{sum(ok for _, _, ok in refused)} refused with the error envelope "
        f"({statuses(a for _, a, _ in refused)}); {sum(ok for _, _, ok in accepted)} of "
        f"{len(accepted)} accepted by design and forwarded re-encoded; {len(errors_5xx)} "
        f"answered 5xx; {tracebacks} tracebacks in the DEBUG log"
    )
    if errors_5xx:
        figure += f". 5xx: {few(errors_5xx, 6)}"
    if wrong:
        figure += f". Not as expected: {few(wrong, 4)}"
    return [
        table_row(
            "hostile bodies",
            figure,
            "every hostile body a 4xx with the JSON error envelope (413 when too large, the "
            "field named for refused overrides and bad values), 0 5xx, no Traceback in the "
            "gateway's DEBUG log; bodies accepted by design forwarded re-encoded",
            not errors_5xx and not wrong and tracebacks == 0,
        )
    ]
