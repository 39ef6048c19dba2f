"""Time to first content chunk (TTFC) added by the output guardrails' hold-back window.

    .venv/bin/python bench/guardrails.py [-n 20] [--token-ms 20]

A fake OpenAI upstream here streams tokens of 4 characters ("tok "), one every
``--token-ms`` ms after the role chunk; a gateway in this process serves it, first
with no output guardrail, then with each guardrail below. Per configuration ``-n``
streams, one at a time: TTFC is the time from sending the request to the first chunk
with non-empty content. Printed per configuration: the hold-back window (characters),
TTFC p50 / p90, the added TTFC p50, and what the window alone predicts (the tokens
needed to fill it, times ``--token-ms``). Then the CPU cost of the pure filter
(:class:`~sluice.guardrails.stream.StreamGuard`) per chunk.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import re
import statistics
import tempfile
import time
from pathlib import Path

from sluice.config import parse_config
from sluice.core.connection import Timeouts
from sluice.core.principal import Principal
from sluice.core.upstream_request import UpstreamRequest
from sluice.guardrails.selection import Guardrails
from sluice.guardrails.stream import StreamGuard
from sluice.server.lifecycle import start_gateway, stop_gateway
from sluice.settings import build_settings
from sluice.transport.port import UpstreamResponse
from sluice.wire.chunks import Choice, Delta


class _NoWebhooks:
    """The benchmarked rules never call out."""

    async def send(self, req: UpstreamRequest, timeouts: Timeouts) -> UpstreamResponse:
        raise AssertionError(req.url)


_NO_WEBHOOKS = _NoWebhooks()

TOKEN = "tok "
ROLE = (
    b'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m",'
    b'"choices":[{"index":0,"delta":{"role":"assistant","content":""},'
    b'"finish_reason":null}]}\n\n'
)
CHUNK = (
    b'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m",'
    b'"choices":[{"index":0,"delta":{"content":"' + TOKEN.encode() + b'"},'
    b'"finish_reason":null}]}\n\n'
)
FIRST_CONTENT = re.compile(rb'"content":"[^"]')
GUARDRAILS = {
    "none": "",
    "keywords": 'kind = "keywords"\nwords = ["password", "secret"]\naction = "redact"',
    "regex sk-…{20,48}": 'kind = "regex"\npattern = "sk-[A-Za-z0-9]{20,48}"',
    "regex sk-…{20,} (issue example)": 'kind = "regex"\npattern = "sk-[A-Za-z0-9]{20,}"',
    "the same, action redact": (
        'kind = "regex"\npattern = "sk-[A-Za-z0-9]{20,}"\naction = "redact"'
    ),
    "pii (keys, emails, cards)": 'kind = "pii"\naction = "redact"',
}


class Upstream:
    """Streams ``TOKEN`` every ``token_ms`` until the gateway hangs up (at most 1000)."""

    def __init__(self, token_ms: float) -> None:
        self.pause = token_ms / 1000
        self.port = 0
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self.serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            found = re.search(rb"(?i)content-length:\s*(\d+)", head)
            await reader.readexactly(int(found.group(1)) if found else 0)
            writer.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                b"transfer-encoding: chunked\r\n\r\n" + b"%x\r\n%s\r\n" % (len(ROLE), ROLE)
            )
            for _ in range(1000):
                writer.write(b"%x\r\n%s\r\n" % (len(CHUNK), CHUNK))
                await writer.drain()
                await asyncio.sleep(self.pause)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()


async def ttfc(port: int, key: str) -> float:
    body = json.dumps(
        {"model": "bench/m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    ).encode()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    started = time.perf_counter()
    writer.write(
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (key.encode(), len(body), body)
    )
    seen = b""
    while not FIRST_CONTENT.search(seen):
        data = await reader.read(65536)
        if not data:
            raise RuntimeError("stream ended early")
        seen += data
    elapsed = time.perf_counter() - started
    writer.close()
    await writer.wait_closed()
    return elapsed * 1000


def config(upstream_port: int, guardrail: str) -> str:
    rail = f'\n[[guardrails]]\nname = "g"\nstage = "output"\n{guardrail}\n' if guardrail else ""
    return f"""
[server]
port = 0
demo = false
env_connections = false
sse_keepalive_interval = 0
[[connections]]
id = "conn_up"
provider = "openai-compatible"
base_url = "http://127.0.0.1:{upstream_port}/v1"
[[models]]
id = "bench/m"
providers = {{ conn_up = "m" }}
{rail}"""


def window(guardrail: str) -> int:
    if not guardrail:
        return 0
    file = parse_config(config(1, guardrail))
    who = Principal("a", "a", "k", "k", metered=False, is_dev=True)
    spans = Guardrails(file.guardrails, _NO_WEBHOOKS).select(who, None).output.spans
    return max(r.hold_back for r in spans)


async def measure(n: int, token_ms: float) -> list[tuple[str, int, list[float]]]:
    upstream = Upstream(token_ms)
    await upstream.start()
    results = []
    try:
        for name, guardrail in GUARDRAILS.items():
            with tempfile.TemporaryDirectory() as home:
                settings = build_settings(
                    parse_config(config(upstream.port, guardrail)), {}, Path(home)
                )
                gw = await start_gateway(settings)
                try:
                    assert gw.dev_key is not None
                    await ttfc(gw.port, gw.dev_key.key)  # warm up
                    times = [await ttfc(gw.port, gw.dev_key.key) for _ in range(n)]
                finally:
                    await stop_gateway(gw)
            results.append((name, window(guardrail), times))
    finally:
        await upstream.close()
    return results


def filter_cost(guardrail: str, chunks: int = 20_000) -> float:
    """Microseconds of :meth:`StreamGuard.filter` per one-token chunk."""
    file = parse_config(config(1, guardrail))
    who = Principal("a", "a", "k", "k", metered=False, is_dev=True)
    rules = Guardrails(file.guardrails, _NO_WEBHOOKS).select(who, None).output
    guard = StreamGuard(rules.spans, rules.wholes, [])
    batches = [[[Choice(0, Delta(content=TOKEN), None)]] for _ in range(chunks)]
    started = time.perf_counter()
    for batch in batches:
        guard.filter(batch)
    return (time.perf_counter() - started) / chunks * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=20, help="streams per configuration")
    parser.add_argument("--token-ms", type=float, default=20.0, help="upstream pace")
    args = parser.parse_args()
    results = asyncio.run(measure(args.n, args.token_ms))
    base = statistics.median(results[0][2])
    print(f"token every {args.token_ms:g} ms, {len(TOKEN)} characters; {args.n} streams each")
    head = f"{'output guardrail':34} {'window':>7} {'p50':>9} {'p90':>9} {'added':>9}"
    print(f"{head} {'window alone':>13}")
    for name, held, times in results:
        p50, p90 = statistics.median(times), statistics.quantiles(times, n=10)[-1]
        predicted = (math.ceil((held + 1) / len(TOKEN)) - 1) * args.token_ms
        print(
            f"{name:34} {held:>7} {p50:>7.1f}ms {p90:>7.1f}ms "
            f"{p50 - base:>+7.1f}ms {predicted:>11.0f}ms"
        )
    print("\nfilter CPU per one-token chunk (StreamGuard.filter):")
    for name, guardrail in list(GUARDRAILS.items())[1:]:
        print(f"  {name:34} {filter_cost(guardrail):6.2f} µs")


if __name__ == "__main__":
    main()
