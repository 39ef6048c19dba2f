"""The "request smuggling framings" rows: each framing vector (``protocol_vectors_framing``,
``protocol_vectors_request_line``) straight to a gateway on a socket of its own, with a
fake upstream that records what reached it; and the Host header vectors."""

from __future__ import annotations

import asyncio
import re
from collections import Counter

from bench.resilience.harness import Context, Row, gateway
from bench.resilience.protocol_exchange import Answer, bounded, send
from bench.resilience.protocol_framing import Framing
from bench.resilience.protocol_support import ENV, fake_upstream, few, statuses, table_row
from bench.resilience.protocol_vectors_framing import framings
from tests.support.gateway import openai_connection_toml


def _refused(answer: Answer) -> bool:
    status = answer.status
    return status is not None and (400 <= status < 500 or status in (501, 505))


async def smuggling(ctx: Context) -> list[Row]:
    """Each framing straight to a gateway on a socket of its own, with the valid key and a
    body that would reach the upstream if the framing were accepted."""
    fake = await fake_upstream()
    config = openai_connection_toml(fake.base_url)
    try:
        async with gateway(ctx, config, name="smuggling", env=ENV) as gw:
            vectors = framings(gw.key)
            answers = await bounded(
                send(
                    gw.host,
                    gw.port,
                    v.head,
                    v.body,
                    stream=v.stream,
                    wait=15,
                    responses=v.expect_upstream if v.kind == "control" else 1,
                )
                for v in vectors
            )
            await asyncio.sleep(0.5)  # a pipelined leftover would be served by now
            log = gw.log_text()
    finally:
        await fake.close()
    reached = Counter(
        m.group(0) for r in fake.requests for m in re.finditer(rb"framing-\d{3}", r.body)
    )

    def count(v: Framing) -> int:
        return reached[v.marker.encode()]

    rows = []
    for kind, title in (
        ("vector", "request smuggling framings"),
        ("host", "Host header (RFC 9112 §3.2)"),
    ):
        picked = [(v, a) for v, a in zip(vectors, answers, strict=True) if v.kind == kind]
        if kind == "vector":
            good = [(v, a) for v, a in picked if _refused(a) and count(v) == 0]
        else:
            good = [(v, a) for v, a in picked if a.status == 400 and count(v) == 0]
        bad = [f"{v.name} -> {a.status or a.error}" for v, a in picked if (v, a) not in good]
        leaked = sum(count(v) for v, _ in picked)
        figure = (
            f"{len(picked)} vectors, {sum(_refused(a) for _, a in picked)} refused "
            f"({statuses(a for _, a in picked)}), {leaked} reached the upstream"
        )
        if kind == "vector":
            controls = [
                (v, a) for v, a in zip(vectors, answers, strict=True) if v.kind == "control"
            ]
            served = [v for v, a in controls if a.status == 200 and count(v) == v.expect_upstream]
            figure += f"; {len(served)} of {len(controls)} valid controls served"
            bad += [f"control {v.name} not served" for v, _ in controls if v not in served]
            criterion = (
                "every vector refused (4xx, or 501/505) and none reaches the upstream; every "
                "valid control served"
            )
        else:
            criterion = "400 for a missing, repeated or invalid Host; none reaches the upstream"
        if bad:
            figure += f". Not refused: {few(bad, 6)}"
        if "Traceback" in log:
            figure += ". Traceback in the gateway log"
        rows.append(table_row(title, figure, criterion, not bad and "Traceback" not in log))
    return rows
