"""A stand-in OTLP/HTTP trace collector for bench/observability.py: it decodes every
export, counts spans by service name, answers 200, and tells its counts on ``/stats``.

    .venv/bin/python -m bench.otlp_collector PORT
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import aiohttp
from aiohttp import web

HOST = "127.0.0.1"
COLLECTOR_PORT = 9318


@dataclass(frozen=True)
class CollectorStats:
    posts: int
    bytes: int
    spans: dict[str, int]  # by service name


async def collector_stats(session: aiohttp.ClientSession) -> CollectorStats:
    async with session.get(f"http://{HOST}:{COLLECTOR_PORT}/stats") as resp:
        doc = await resp.json()
    return CollectorStats(int(doc["posts"]), int(doc["bytes"]), dict(doc["spans"]))


async def final_stats() -> CollectorStats:
    async with aiohttp.ClientSession() as session:
        return await collector_stats(session)


def collector_app() -> web.Application:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
        ExportTraceServiceResponse,
    )

    counts: dict[str, int] = {}
    totals = {"posts": 0, "bytes": 0}
    answer = ExportTraceServiceResponse().SerializeToString()

    async def traces(request: web.Request) -> web.Response:
        body = await request.read()
        totals["posts"] += 1
        totals["bytes"] += len(body)
        export = ExportTraceServiceRequest.FromString(body)
        for batch in export.resource_spans:
            names = [
                a.value.string_value for a in batch.resource.attributes if a.key == "service.name"
            ]
            service = names[0] if names else "?"
            counts[service] = counts.get(service, 0) + sum(len(s.spans) for s in batch.scope_spans)
        return web.Response(body=answer, content_type="application/x-protobuf")

    async def stats(request: web.Request) -> web.Response:
        return web.json_response({**totals, "spans": counts})

    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_post("/v1/traces", traces)
    app.router.add_get("/stats", stats)
    return app


def main(argv: list[str]) -> int:
    web.run_app(collector_app(), host=HOST, port=int(argv[0]), print=None)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
