"""What the load rows share: an upstream that swallows big bodies, a latency probe of
legitimate requests, an RSS sampler, and raw sockets that misbehave on purpose."""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.resilience.harness import Gateway
from tests.support.fake_openai import chunk, completion
from tests.support.fake_upstream import Step
from tests.support.raw_http import RawClient, post

MIB = 1024 * 1024

SMALL = json.dumps(
    {"model": "test/gpt-fake", "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]}
).encode()
"""A legitimate request: small, whole (not streamed)."""
TRICKLE = (
    b"POST /v1/chat/completions HTTP/1.1\r\nHost: gateway.test\r\n"
    b"Content-Type: application/json\r\n" + b"X-Padding: slow\r\n" * 50
)
"""A slowloris head: never ends."""
PIECE = 256 * 1024
"""What an upload writes at a time."""


class SinkUpstream:
    """An OpenAI-compatible upstream that reads request bodies without keeping them
    (``FakeUpstream`` buffers with ``+=``: seconds of CPU for a 15 MiB body, in the
    process that measures latency) and answers every request with a short completion."""

    def __init__(self) -> None:
        self._server: asyncio.Server | None = None
        self.port = 0
        answer = json.dumps(completion("ok")).encode()
        self._answer = (
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
            b"content-length: %d\r\n\r\n%b" % (len(answer), answer)
        )

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                left = length
                while left:
                    data = await reader.read(min(left, 1 << 20))
                    if not data:
                        return
                    left -= len(data)
                writer.write(self._answer)
                await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            pass
        finally:
            writer.close()


def big_stream() -> list[Step]:
    steps: list[Step] = [chunk(role="assistant", content="")]
    steps += [chunk(content="y" * 4000)] * 2_500  # ~10 MB, as fast as the gateway takes it
    return steps


async def warm_streams(gw: Gateway, body: bytes) -> None:
    """The stream path once whole (short), once cut by its client (the big one)."""
    for cut in (False, True):
        client = await RawClient.connect(gw.host, gw.port)
        try:
            await client.send(post("/v1/chat/completions", body, gw.key))
            if not cut:
                assert (await client.read_response()).status == 200
                continue
            await client.read_head()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(0.3):
                    while await client.reader.read(65536):
                        pass
        finally:
            await client.close()


@dataclass
class Probe:
    """Latencies (seconds) of legitimate requests, and the ones that did not get a 200."""

    latencies: list[float] = field(default_factory=list)
    failures: dict[str, int] = field(default_factory=dict)

    def extend(self, other: Probe) -> None:
        self.latencies += other.latencies
        for name, count in other.failures.items():
            self.failures[name] = self.failures.get(name, 0) + count


async def probe(
    gw: Gateway,
    seconds: float,
    concurrency: int,
    *,
    until: asyncio.Future[Any] | None = None,
    pause: float = 0.002,
) -> Probe:
    """Small chat requests (each on a new connection) from ``concurrency`` clients for
    ``seconds`` (or until ``until`` is done); each client waits ``pause`` between
    requests (a modest load)."""
    found = Probe()
    request = post("/v1/chat/completions", SMALL, gw.key)
    end = time.monotonic() + seconds

    async def client() -> None:
        while time.monotonic() < end and not (until is not None and until.done()):
            started = time.monotonic()
            try:
                conn = await RawClient.connect(gw.host, gw.port)
                try:
                    await conn.send(request)
                    status = (await asyncio.wait_for(conn.read_response(), 30)).status
                finally:
                    await conn.close()
            except (OSError, asyncio.IncompleteReadError, TimeoutError) as exc:
                status, name = 0, type(exc).__name__
            else:
                name = str(status)
            if status == 200:
                found.latencies.append(time.monotonic() - started)
            else:
                found.failures[name] = found.failures.get(name, 0) + 1
            await asyncio.sleep(pause)

    await asyncio.gather(*(client() for _ in range(concurrency)))
    return found


class RssPeak:
    """The gateway's largest RSS while it runs, sampled every ``every`` seconds."""

    def __init__(self, gw: Gateway, every: float = 0.01) -> None:
        self.gw = gw
        self.every = every
        self.peak = gw.rss_bytes()
        self._task: asyncio.Task[None] | None = None

    async def _sample(self) -> None:
        while True:
            with contextlib.suppress(OSError):
                self.peak = max(self.peak, self.gw.rss_bytes())
            await asyncio.sleep(self.every)

    async def __aenter__(self) -> RssPeak:
        self._task = asyncio.ensure_future(self._sample())
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        with contextlib.suppress(OSError):
            self.peak = max(self.peak, self.gw.rss_bytes())


async def raw_socket(gw: Gateway, rcvbuf: int | None = None) -> socket.socket:
    """A connected non-blocking socket; ``rcvbuf`` pins its receive buffer (set before
    connecting, so the window it advertises is small from the start)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.setblocking(False)
    try:
        await asyncio.get_running_loop().sock_connect(sock, (gw.host, gw.port))
    except BaseException:
        sock.close()
        raise
    return sock


def _tcp_sockets() -> list[tuple[int, int, str, int, int]]:
    """(local port, remote port, state, send queue, receive queue) of every IPv4 socket."""
    found = []
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        tx, rx = (int(q, 16) for q in fields[4].split(":"))
        local, remote = (int(fields[i].split(":")[1], 16) for i in (1, 2))
        found.append((local, remote, fields[3], tx, rx))
    return found


def tcp_queues(port: int) -> tuple[int, int, int]:
    """What the kernel holds on connections to the server on ``port``: bytes received
    and not read by its clients (their receive queues), bytes it wrote and had not
    acknowledged (its send queues), and how many of those connections are established."""
    unread = unsent = established = 0
    for local, remote, state, tx, rx in _tcp_sockets():
        if remote == port:
            unread += rx
            established += state == "01"
        elif local == port:
            unsent += tx
    return unread, unsent, established


async def closed_by(port: int, socks: list[socket.socket], until: float) -> list[float | None]:
    """When (``time.monotonic()``) the server on ``port`` closed its end of each client
    socket (its socket left ESTABLISHED; seen in /proc/net/tcp, so the client reads
    nothing, and a close stuck behind unsent data counts); ``None`` if still open at
    ``until``."""
    ports = {sock.getsockname()[1]: i for i, sock in enumerate(socks)}
    found: list[float | None] = [None] * len(socks)
    while time.monotonic() < until and any(t is None for t in found):
        established = {r for loc, r, state, _, _ in _tcp_sockets() if loc == port and state == "01"}
        now = time.monotonic()
        for client, i in ports.items():
            if found[i] is None and client not in established:
                found[i] = now
        await asyncio.sleep(0.02)
    return found


class Slowloris:
    """``n`` connections, each sending its head one byte every 0.5-1 s and opening a
    new connection when cut; records how long each lived (from its first byte) and
    the status it was answered with."""

    def __init__(self, gw: Gateway, n: int, rng: random.Random) -> None:
        self.gw, self.n, self.rng = gw, n, rng
        self.lives: list[float] = []
        self.statuses: dict[str, int] = {}
        self.connected = 0
        self._stop = asyncio.Event()
        self._started: dict[int, float] = {}
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        self._tasks = [asyncio.ensure_future(self._attacker(i)) for i in range(self.n)]

    async def ready(self) -> None:
        async with asyncio.timeout(30):
            while self.connected < self.n:
                await asyncio.sleep(0.01)

    async def stop(self) -> float:
        """Stop; the age of the oldest connection still open (it should be young)."""
        oldest = max((time.monotonic() - t for t in self._started.values()), default=0.0)
        self._stop.set()
        await asyncio.gather(*self._tasks)
        return oldest

    async def _attacker(self, i: int) -> None:
        loop = asyncio.get_running_loop()
        first = True
        while not self._stop.is_set():
            try:
                sock = await raw_socket(self.gw)
            except OSError:
                await asyncio.sleep(0.1)
                continue
            try:
                with contextlib.suppress(OSError):
                    await loop.sock_sendall(sock, TRICKLE[:1])
                    self._started[i] = time.monotonic()
                    if first:
                        first, self.connected = False, self.connected + 1
                    await self._trickle(i, sock)
            finally:
                self._started.pop(i, None)
                sock.close()

    async def _trickle(self, i: int, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        answer = b""
        reading = asyncio.ensure_future(loop.sock_recv(sock, 4096))
        stopping = asyncio.ensure_future(self._stop.wait())
        offset = 1
        try:
            while True:
                pause = self.rng.uniform(0.5, 1.0)
                await asyncio.wait(
                    {reading, stopping}, timeout=pause, return_when=asyncio.FIRST_COMPLETED
                )
                if stopping.done():
                    return
                if reading.done():
                    try:
                        data = reading.result()
                    except OSError:
                        data = b""
                    if data:
                        answer += data
                        reading = asyncio.ensure_future(loop.sock_recv(sock, 4096))
                        continue
                    self.lives.append(time.monotonic() - self._started[i])
                    status = answer[9:12].decode("latin-1") if answer else "reset"
                    self.statuses[status] = self.statuses.get(status, 0) + 1
                    return
                with contextlib.suppress(OSError):
                    await loop.sock_sendall(sock, TRICKLE[offset % len(TRICKLE) :][:1])
                offset += 1
        finally:
            for task in (reading, stopping):
                task.cancel()
            await asyncio.gather(reading, stopping, return_exceptions=True)


def upload_body(size: int) -> bytes:
    """A valid chat request of exactly ``size`` bytes (one long message)."""
    head = b'{"model":"test/gpt-fake","max_tokens":16,"messages":[{"role":"user","content":"'
    tail = b'"}]}'
    return head + b"x" * (size - len(head) - len(tail)) + tail


@dataclass
class Upload:
    status: int  # 0: no answer
    busy: bool  # 503 server_busy with Retry-After
    sent: int  # body bytes written when the answer came
    after: float  # seconds from the head to the answer


async def upload(gw: Gateway, body: bytes, seconds: float) -> Upload:
    """POST ``body`` (declared with Content-Length) in pieces spread over ``seconds``
    (0: as fast as the gateway reads), reading the answer meanwhile; stop sending once
    it comes."""
    client = await RawClient.connect(gw.host, gw.port)
    head = post("/v1/chat/completions", b"", gw.key).replace(
        b"Content-Length: 0", b"Content-Length: %d" % len(body)
    )
    view = memoryview(body)
    sent = 0
    answered_with = [0]
    try:
        client.writer.write(head)
        started = time.monotonic()
        answer = asyncio.ensure_future(asyncio.wait_for(client.read_response(), 120))
        answer.add_done_callback(lambda _: answered_with.__setitem__(0, sent))
        pieces = -(-len(body) // PIECE)
        with contextlib.suppress(ConnectionError):
            for i in range(pieces):
                if answer.done():
                    break
                client.writer.write(view[i * PIECE : (i + 1) * PIECE])
                sent = min(len(body), (i + 1) * PIECE)
                await client.writer.drain()
                if seconds:
                    due = started + seconds * (i + 1) / pieces
                    await asyncio.wait({answer}, timeout=max(0.0, due - time.monotonic()))
        try:
            response = await answer
        except (OSError, asyncio.IncompleteReadError, TimeoutError):
            return Upload(0, False, answered_with[0], time.monotonic() - started)
        after = time.monotonic() - started
    finally:
        await client.close()
    busy = (
        response.status == 503
        and response.headers.get("retry-after") == "1"
        and b"server_busy" in response.body
    )
    return Upload(response.status, busy, answered_with[0], after)
