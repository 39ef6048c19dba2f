"""What the noisy-neighbour rows share: an upstream that streams cheaply, two tenants
made through the admin API, the bystander's streams and the ``/health`` probe, and the
attacker's process."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.resilience.harness import Gateway, percentile
from tests.support.raw_http import RawClient

ADMIN_KEY = "admin-" + "n" * 40


def _sse(doc: dict[str, Any]) -> bytes:
    data = b"data: " + json.dumps(doc).encode() + b"\n\n"
    return b"%x\r\n%b\r\n" % (len(data), data)


def _chunk(content: str | None, finish: str | None = None) -> dict[str, Any]:
    delta = {} if content is None else {"content": content}
    return {
        "id": "chatcmpl-n",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-fake",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def _stream(pieces: int, piece: str) -> bytes:
    """A chunked SSE answer: ``pieces`` content chunks, a finish, usage, ``[DONE]``."""
    usage = {**_chunk(None), "choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 8}}
    events = [_sse({**_chunk(""), "choices": [{"index": 0, "delta": {"role": "assistant"}}]})]
    events += [_sse(_chunk(piece)) for _ in range(pieces)]
    events += [_sse(_chunk(None, "stop")), _sse(usage)]
    done = b"data: [DONE]\n\n"
    events.append(b"%x\r\n%b\r\n0\r\n\r\n" % (len(done), done))
    head = (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
    )
    return head + b"".join(events)


def _json(doc: dict[str, Any]) -> bytes:
    body = json.dumps(doc).encode()
    head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n"
    return head % len(body) + body


class StreamingUpstream:
    """OpenAI- and Anthropic-shaped answers written from bytes made once: a short stream
    (8 pieces) for any chat request, a ~10 MB one for model ``gpt-big`` (a slow reader's),
    and ``{"input_tokens"}`` for a Messages count. Counts the calls by path."""

    def __init__(self) -> None:
        self._server: asyncio.Server | None = None
        self.port = 0
        self.calls: dict[str, int] = {}
        self._short = _stream(8, "hello ")
        self._big = _stream(2500, "y" * 4000)
        self._count = _json({"input_tokens": 7})
        self.release = asyncio.Event()
        """Set: the streams of model ``gpt-wait`` (held after their first piece) end."""

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        self.release.set()
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(2):
                    await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                path = head.split(b" ", 2)[1].decode("latin-1")
                self.calls[path] = self.calls.get(path, 0) + 1
                length = 0
                for line in head.split(b"\r\n"):
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                body = await reader.readexactly(length)
                if path.endswith("/count_tokens"):
                    writer.write(self._count)
                elif b'"gpt-wait"' in body:  # in flight until released
                    first = self._short.index(b"hello ")  # through the first content piece
                    first = self._short.index(b"\r\n", first) + 2
                    writer.write(self._short[:first])
                    await self.release.wait()
                    writer.write(self._short[first:])
                else:
                    writer.write(self._big if b'"gpt-big"' in body else self._short)
                await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            pass
        finally:
            writer.close()


def config_toml(upstream: StreamingUpstream, extra_server: str = "") -> str:
    url = upstream.base_url
    return f"""
[server]
sse_keepalive_interval = 0
client_write_timeout = 5
{extra_server}

[[connections]]
id = "conn_fake"
provider = "openai-compatible"
base_url = "{url}/v1"
api_key_env = "FAKE_UPSTREAM_KEY"

[[connections]]
id = "conn_claude"
provider = "anthropic"
base_url = "{url}"
api_key_env = "FAKE_UPSTREAM_KEY"

[[models]]
id = "test/gpt-fake"
providers = {{ conn_fake = "gpt-fake" }}
price = {{ input = 2.0, output = 8.0 }}

[[models]]
id = "test/gpt-big"
providers = {{ conn_fake = "gpt-big" }}
price = {{ input = 2.0, output = 8.0 }}

[[models]]
id = "test/gpt-wait"
providers = {{ conn_fake = "gpt-wait" }}
price = {{ input = 2.0, output = 8.0 }}

[[models]]
id = "test/claude-fake"
providers = {{ conn_claude = "claude-fake" }}
price = {{ input = 3.0, output = 15.0 }}
"""


async def admin(gw: Gateway, method: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
    client = await RawClient.connect(gw.host, gw.port)
    try:
        data = json.dumps(body).encode()
        await client.send(
            f"{method} {path} HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {ADMIN_KEY}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n".encode()
            + data
        )
        response = await client.read_response()
        assert response.status in (200, 201), (response.status, response.body[:300])
        return dict(response.json())
    finally:
        await client.close()


async def tenant(gw: Gateway, name: str, credits: str, **fields: Any) -> str:
    """A new account with ``credits`` (USD) and one key with ``fields``; its secret."""
    await admin(gw, "POST", "/admin/accounts", {"name": name, "credits": credits})
    return await key(gw, name, **fields)


async def key(gw: Gateway, account: str, **fields: Any) -> str:
    """A new key of ``account`` with ``fields`` (``rpm``, …); its secret."""
    made = await admin(gw, "POST", f"/admin/accounts/{account}/keys", fields)
    return str(made["key"])


@dataclass
class Latencies:
    """Seconds each answer took; the answers that were not a 200, by what they were."""

    seconds: list[float] = field(default_factory=list)
    failures: dict[str, int] = field(default_factory=dict)

    def p(self, q: float) -> float:
        return percentile(self.seconds, q)

    def failed(self, what: str) -> None:
        self.failures[what] = self.failures.get(what, 0) + 1


STREAM_BODY = json.dumps(
    {
        "model": "test/gpt-fake",
        "stream": True,
        "stream_options": {"include_usage": True},
        "messages": [{"role": "user", "content": "hello"}],
    }
).encode()


async def _keepalive_loop(
    gw: Gateway, request: bytes, seconds: float, pause: float, found: Latencies
) -> None:
    end = time.monotonic() + seconds
    client: RawClient | None = None
    try:
        while time.monotonic() < end:
            started = time.monotonic()
            try:
                if client is None:
                    client = await RawClient.connect(gw.host, gw.port)
                await client.send(request)
                response = await asyncio.wait_for(client.read_response(), 30)
            except (OSError, asyncio.IncompleteReadError, TimeoutError) as exc:
                found.failed(type(exc).__name__)
                if client is not None:
                    await client.close()
                client = None
                continue
            if response.status == 200 and (b"[DONE]" in response.body or b"ok" in response.body):
                found.seconds.append(time.monotonic() - started)
            else:
                found.failed(str(response.status))
            await asyncio.sleep(pause)
    finally:
        if client is not None:
            await client.close()


async def bystander(gw: Gateway, key: str, seconds: float, clients: int = 4) -> Latencies:
    """``clients`` keep-alive clients, each streaming a short answer again and again
    (2 ms apart): each stream's time from request to ``[DONE]``."""
    found = Latencies()
    request = (
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {key}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(STREAM_BODY)}\r\n\r\n"
    ).encode() + STREAM_BODY
    await asyncio.gather(
        *(_keepalive_loop(gw, request, seconds, 0.002, found) for _ in range(clients))
    )
    return found


async def health(gw: Gateway, seconds: float) -> Latencies:
    """``GET /health`` every 10 ms on one keep-alive connection."""
    found = Latencies()
    await _keepalive_loop(gw, b"GET /health HTTP/1.1\r\nHost: t\r\n\r\n", seconds, 0.01, found)
    return found


class InFlight:
    """``n`` of a tenant's streams held open (the upstream holds them after their first
    piece until released): the requests in flight a live feed shows."""

    def __init__(self, gw: Gateway, key: str, n: int) -> None:
        self.gw, self.key, self.n = gw, key, n
        self.clients: list[RawClient] = []

    async def __aenter__(self) -> InFlight:
        body = json.dumps(
            {
                "model": "test/gpt-wait",
                "stream": True,
                "messages": [{"role": "user", "content": "w"}],
            }
        ).encode()
        request = (
            f"POST /v1/chat/completions HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {self.key}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode() + body
        for _ in range(self.n):
            client = await RawClient.connect(self.gw.host, self.gw.port)
            await client.send(request)
            status, _ = await client.read_head()
            assert status == 200, status
            self.clients.append(client)
        return self

    async def __aexit__(self, *exc: object) -> None:
        for client in self.clients:
            await client.close()


@dataclass
class Attack:
    """What the attacker's process reported."""

    sent: int
    statuses: dict[str, int]

    def text(self) -> str:
        by = ", ".join(f"{k}: {v}" for k, v in sorted(self.statuses.items()))
        return f"{self.sent} sent ({by or 'none answered'})"


class Attacker:
    """The attack in a niced process of its own (the harness keeps its share of the CPU
    it shares with it). :meth:`start` returns once the process is running its attack
    (its interpreter's start-up, slower on a busy machine, is not part of the attack)."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self._proc = proc

    @classmethod
    async def start(
        cls, gw: Gateway, path: str, key: str, seconds: float, connections: int
    ) -> Attacker:
        root = Path(__file__).resolve().parents[2]
        env = {**os.environ, "PYTHONPATH": str(root)}
        args = [path, gw.host, str(gw.port), key, str(seconds), str(connections)]
        proc = await asyncio.create_subprocess_exec(
            "nice", "-n", "19", sys.executable, "-m", "bench.resilience.neighbours_attack",
            *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env,
        )  # fmt: skip
        assert proc.stdout is not None
        if (await proc.stdout.readline()).strip() != b"started":
            await cls(proc).result()  # raises with its error
        return cls(proc)

    async def result(self) -> Attack:
        out, err = await self._proc.communicate()
        if self._proc.returncode != 0 or not out.strip():
            raise RuntimeError(f"the attacker failed: {err.decode(errors='replace')[-1500:]}")
        report = json.loads(out.decode().strip().splitlines()[-1])
        return Attack(report["sent"], report["statuses"])
