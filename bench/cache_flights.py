"""Identical requests in flight (docs/cache.md#identical-requests-in-flight): bursts of
concurrent identical streamed requests, with the model's response cache on and off.

    .venv/bin/python -m bench.cache_flights [--bursts 5] [--sizes 1,10,50] [--token-ms 10]

A fake OpenAI upstream here counts the requests it is sent and streams 20 chunks, one
every ``--token-ms`` ms, then the finish and the usage. A gateway in this process
(development key) serves it. Each burst is ``size`` requests with the same prompt sent
at once; every burst asks something new, so with the cache on each burst is one miss
and the rest join its flight (none is a hit on a kept answer). Printed per
configuration and size: upstream calls per burst, whether every client got the whole
transcript, the time to the last byte (p50 and max over the burst's requests, ms).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import tempfile
import time
from pathlib import Path

from sluice.config import parse_config
from sluice.server.lifecycle import start_gateway, stop_gateway
from sluice.settings import build_settings

CHUNKS = 20
PIECE = "tok "


def _event(delta: str, finish: str = "null", usage: str = "") -> bytes:
    choices = f'[{{"index":0,"delta":{delta},"finish_reason":{finish}}}]' if delta else "[]"
    head = '"id":"c","object":"chat.completion.chunk","created":1,"model":"m"'
    body = f'{{{head},"choices":{choices}{usage}}}'
    return b"data: " + body.encode() + b"\n\n"


ROLE = _event('{"role":"assistant","content":""}')
CHUNK = _event(json.dumps({"content": PIECE}))
FINISH = _event("{}", '"stop"')
USAGE = _event("", usage=',"usage":{"prompt_tokens":5,"completion_tokens":20,"total_tokens":25}')
DONE = b"data: [DONE]\n\n"
CONTENT = re.compile(rb'"content":"([^"]*)"')


class Upstream:
    """Streams the answer at ``token_ms`` a chunk; counts the requests it was sent."""

    def __init__(self, token_ms: float) -> None:
        self.pause = token_ms / 1000
        self.port = 0
        self.calls = 0
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
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                found = re.search(rb"(?i)content-length:\s*(\d+)", head)
                await reader.readexactly(int(found.group(1)) if found else 0)
                self.calls += 1
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                    b"transfer-encoding: chunked\r\n\r\n"
                )
                for event in (ROLE, *([CHUNK] * CHUNKS), FINISH, USAGE, DONE):
                    writer.write(b"%x\r\n%s\r\n" % (len(event), event))
                    await writer.drain()
                    if event is CHUNK:
                        await asyncio.sleep(self.pause)
                writer.write(b"0\r\n\r\n")
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()


async def _streamed(port: int, key: str, prompt: str) -> tuple[float, str]:
    """Seconds to the stream's last byte, and the text it carried."""
    body = json.dumps(
        {"model": "bench/m", "stream": True, "messages": [{"role": "user", "content": prompt}]}
    ).encode()
    started = time.perf_counter()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
        b"Connection: close\r\nContent-Length: %d\r\n\r\n%s" % (key.encode(), len(body), body)
    )
    received = await reader.read()
    elapsed = time.perf_counter() - started
    writer.close()
    text = b"".join(CONTENT.findall(received)).decode()
    return elapsed, text


def config(upstream_port: int, cached: bool) -> str:
    cache = "cache = { ttl = 600 }\n" if cached else ""
    return f"""
[server]
port = 0
demo = false
env_connections = false
[[connections]]
id = "conn_up"
provider = "openai-compatible"
base_url = "http://127.0.0.1:{upstream_port}/v1"
[[models]]
id = "bench/m"
providers = {{ conn_up = "m" }}
{cache}"""


async def _bursts(
    cached: bool, sizes: list[int], bursts: int, token_ms: float
) -> list[tuple[int, float, bool, float, float]]:
    upstream = Upstream(token_ms)
    await upstream.start()
    rows = []
    try:
        with tempfile.TemporaryDirectory() as home:
            settings = build_settings(parse_config(config(upstream.port, cached)), {}, Path(home))
            gw = await start_gateway(settings)
            try:
                assert gw.dev_key is not None
                key, asked = gw.dev_key.key, 0
                for size in sizes:
                    calls, whole, times = upstream.calls, True, []
                    for _ in range(bursts):
                        asked += 1
                        done = await asyncio.gather(
                            *(_streamed(gw.port, key, f"question {asked}") for _ in range(size))
                        )
                        whole &= all(text == PIECE * CHUNKS for _, text in done)
                        times += [t * 1000 for t, _ in done]
                    per_burst = (upstream.calls - calls) / bursts
                    rows.append((size, per_burst, whole, statistics.median(times), max(times)))
            finally:
                await stop_gateway(gw)
    finally:
        await upstream.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bursts", type=int, default=5)
    parser.add_argument("--sizes", default="1,10,50")
    parser.add_argument("--token-ms", type=float, default=10.0)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"{CHUNKS} chunks, one every {args.token_ms:g} ms; {args.bursts} bursts per size")
    print("| cache | burst | upstream calls per burst | transcripts whole | TTLB p50 / max (ms) |")
    print("|---|---|---|---|---|")
    for cached in (False, True):
        for size, calls, whole, p50, most in asyncio.run(
            _bursts(cached, sizes, args.bursts, args.token_ms)
        ):
            name, says = "on" if cached else "off", "yes" if whole else "NO"
            print(f"| {name} | {size} | {calls:g} | {says} | {p50:.1f} / {most:.1f} |")


if __name__ == "__main__":
    main()
