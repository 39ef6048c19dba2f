"""What telling a reused upstream connection apart costs per request (bench/README.md).

One aiohttp client against an aiohttp server in the same process, 4 x 3,000 requests per
variant, interleaved: a plain TCPConnector, aiohttp's trace hook, our PoolConnector.
Run: ``taskset -c 1 .venv/bin/python bench/pool_reuse_cost.py``
"""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace

import aiohttp
from aiohttp import web

from sluice.transport.pool import PoolConnector

REQUESTS = 3000
VARIANTS = ("plain", "trace", "pool")


async def answer(request: web.Request) -> web.Response:
    await request.read()
    return web.Response(body=b"{}")


async def on_reuse(
    session: aiohttp.ClientSession, context: SimpleNamespace, params: object
) -> None:
    context.trace_request_ctx.reused = True


async def one_run(variant: str, url: str) -> float:
    """Microseconds per request."""
    tracer = aiohttp.TraceConfig()
    tracer.on_connection_reuseconn.append(on_reuse)
    connector = PoolConnector() if variant == "pool" else aiohttp.TCPConnector()
    traces = [tracer] if variant == "trace" else []
    async with aiohttp.ClientSession(connector=connector, trace_configs=traces) as session:
        started = time.perf_counter()
        for _ in range(REQUESTS):
            context = SimpleNamespace(reused=False) if traces else None
            if isinstance(connector, PoolConnector):
                connector.reused.set(False)
            async with session.post(url, data=b"{}", trace_request_ctx=context) as resp:
                await resp.read()
        return (time.perf_counter() - started) / REQUESTS * 1e6


async def main() -> None:
    app = web.Application()
    app.router.add_post("/x", answer)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    results: dict[str, list[float]] = {v: [] for v in VARIANTS}
    for _ in range(4):
        for variant in VARIANTS:
            results[variant].append(await one_run(variant, f"http://127.0.0.1:{port}/x"))
    await runner.cleanup()
    for variant, runs in results.items():
        runs.sort()
        print(f"{variant:6} min {runs[0]:6.1f}  median {runs[len(runs) // 2]:6.1f} us/request")


if __name__ == "__main__":
    asyncio.run(main())
