"""Cancellation latency: time from a client closing its stream to the upstream socket close.

    .venv/bin/python bench/cancel.py [-n 200] [-c 10] [--gateway-cpu 1]

Starts a fake OpenAI upstream here (one event every 10 ms, 2,000 events: it never ends
on its own within the run) and a gateway process (`sluice serve`, pinned with taskset
when available). Each stream: send the request, read until the first content event,
close the socket (FIN, like a browser abort or an SDK iterator close), and measure how
long until the upstream sees the gateway's side of its connection close. Both times
come from this process's monotonic clock. Prints p50 / p90 / p99 / max in ms.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import signal
import statistics
import sys
import tempfile
from pathlib import Path

CHUNK = (
    b'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m",'
    b'"choices":[{"index":0,"delta":{"content":"tok "},"finish_reason":null}]}\n\n'
)
ROLE = (
    b'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m",'
    b'"choices":[{"index":0,"delta":{"role":"assistant","content":""},'
    b'"finish_reason":null}]}\n\n'
)


class Upstream:
    """Streams slowly; records when the peer of each request (by its `user`) hangs up."""

    def __init__(self) -> None:
        self.hangups: dict[str, float] = {}
        self.waiters: dict[str, asyncio.Event] = {}
        self.port = 0

    def hung_up(self, user: str) -> None:
        self.hangups[user] = asyncio.get_running_loop().time()
        self.waiters.setdefault(user, asyncio.Event()).set()

    async def start(self) -> None:
        server = await asyncio.start_server(self.serve, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        user = ""
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            found = re.search(rb"(?i)content-length:\s*(\d+)", head)
            assert found is not None
            user = json.loads(await reader.readexactly(int(found.group(1))))["user"]
            writer.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                b"transfer-encoding: chunked\r\n\r\n"
            )
            writer.write(b"%x\r\n%s\r\n" % (len(ROLE), ROLE))

            async def stream() -> None:
                for _ in range(2000):
                    writer.write(b"%x\r\n%s\r\n" % (len(CHUNK), CHUNK))
                    await writer.drain()
                    await asyncio.sleep(0.01)

            sending = asyncio.ensure_future(stream())
            hangup = asyncio.ensure_future(reader.read())  # b"" (or reset) when the peer closes
            await asyncio.wait({sending, hangup}, return_when=asyncio.FIRST_COMPLETED)
            if hangup.done():
                self.hung_up(user)
            sending.cancel()
            await asyncio.gather(sending, hangup, return_exceptions=True)
        except (ConnectionError, asyncio.IncompleteReadError):
            self.hung_up(user)
        finally:
            writer.close()


async def one_stream(host: str, port: int, key: str, upstream: Upstream, user: str) -> float:
    body = json.dumps(
        {
            "model": "bench/slow",
            "stream": True,
            "user": user,
            "messages": [{"role": "user", "content": "hi"}],
        }
    ).encode()
    done = upstream.waiters.setdefault(user, asyncio.Event())
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (key.encode(), len(body), body)
    )
    seen = b""
    while b'"content":"tok' not in seen:
        data = await reader.read(65536)
        if not data:
            raise RuntimeError("stream ended early")
        seen += data
    closed_at = asyncio.get_running_loop().time()
    writer.close()
    await done.wait()
    return (upstream.hangups[user] - closed_at) * 1000


async def run(n: int, concurrency: int, cpu: str | None) -> list[float]:
    upstream = Upstream()
    await upstream.start()
    home = Path(tempfile.mkdtemp())
    (home / "sluice.toml").write_text(f"""
[server]
sse_keepalive_interval = 0
env_connections = false
demo = false
[[connections]]
id = "conn_slow"
provider = "openai-compatible"
base_url = "http://127.0.0.1:{upstream.port}/v1"
[[models]]
id = "bench/slow"
providers = {{ conn_slow = "m" }}
""")
    cmd = [
        sys.executable,
        "-m",
        "sluice",
        "serve",
        "--config",
        str(home / "sluice.toml"),
        "--port",
        "0",
        "--log-level",
        "WARNING",
    ]
    if cpu is not None and shutil.which("taskset"):
        cmd = ["taskset", "-c", cpu, *cmd]
    proc = await asyncio.create_subprocess_exec(
        *cmd, stderr=asyncio.subprocess.PIPE, env={**os.environ, "SLUICE_HOME": str(home)}
    )
    assert proc.stderr is not None
    banner = b""
    while b"Press Ctrl-C" not in banner:
        banner += await proc.stderr.readline()
    match = re.search(rb"http://([\d.]+):(\d+)", banner)
    assert match is not None
    host, port = match.group(1).decode(), int(match.group(2))
    key = (home / "dev-key").read_text().strip()
    latencies: list[float] = []
    gate = asyncio.Semaphore(concurrency)

    async def guarded(user: str) -> None:
        async with gate:
            latencies.append(await one_stream(host, port, key, upstream, user))

    try:
        await asyncio.gather(*[guarded(f"u{i}") for i in range(n)])
    finally:
        proc.send_signal(signal.SIGTERM)
        await proc.wait()
        shutil.rmtree(home, ignore_errors=True)
    return latencies


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=200, help="streams to cancel")
    ap.add_argument("-c", type=int, default=10, help="streams at a time")
    ap.add_argument("--gateway-cpu", default="1", help="core for the gateway ('' = no pin)")
    args = ap.parse_args()
    latencies = sorted(asyncio.run(run(args.n, args.c, args.gateway_cpu or None)))
    q = statistics.quantiles(latencies, n=100, method="inclusive")
    print(
        json.dumps(
            {
                "streams": len(latencies),
                "p50_ms": round(q[49], 3),
                "p90_ms": round(q[89], 3),
                "p99_ms": round(q[98], 3),
                "max_ms": round(latencies[-1], 3),
            }
        )
    )


if __name__ == "__main__":
    main()
