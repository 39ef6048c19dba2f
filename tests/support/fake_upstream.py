"""A scriptable fake upstream on 127.0.0.1 (test support), for any provider.

Each incoming request takes the reply of ``responder`` when one is set and answers,
else the next :class:`Reply` from the queue (or the default):
a status and whole body, or a streamed body of steps (bytes, pauses, waits on an
event, an abrupt close). It records every request it received. What it sends is
whatever the test scripts, built with each provider's helpers (``fake_openai`` …);
the official SDKs parse those (``tests/providers/test_*_fidelity.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Pause:
    seconds: float


@dataclass
class WaitFor:
    event: asyncio.Event


@dataclass
class Cut:
    """Close the socket abruptly (no chunked terminator)."""


Step = bytes | Pause | WaitFor | Cut


@dataclass
class Reply:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    steps: list[Step] | None = None  # a streamed body when set
    delay: float = 0.0  # seconds before anything is sent

    @classmethod
    def json(cls, doc: Any, status: int = 200, **headers: str) -> Reply:
        return cls(
            status, {"content-type": "application/json", **headers}, json.dumps(doc).encode()
        )

    @classmethod
    def stream(cls, *steps: Step, delay: float = 0.0) -> Reply:
        return cls(200, {"content-type": "text/event-stream"}, steps=list(steps), delay=delay)

    @classmethod
    def reset(cls, delay: float = 0.0) -> Reply:
        """Drop the connection without sending a byte."""
        return cls(0, delay=delay)


class FakeUpstream:
    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self.replies: deque[Reply] = deque()
        self.default = Reply(404, {"content-type": "application/json"}, b'{"error": "unscripted"}')
        self.closed_streams = 0
        self.disconnects = asyncio.Event()
        self.hangups: list[float] = []  # loop times at which a peer closed mid-answer
        self.hung_up = asyncio.Event()
        self.sent_bytes = 0  # body bytes of streamed replies written so far
        self._server: asyncio.Server | None = None
        self.port = 0
        self.responder: Callable[[Recorded], Reply | None] | None = None

    @property
    def root_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """OpenAI-style base (with ``/v1``)."""
        return self.root_url + "/v1"

    def queue(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        buffer = b""
        try:
            while True:
                while b"\r\n\r\n" not in buffer:
                    data = await reader.read(65536)
                    if not data:
                        return
                    buffer += data
                head, _, buffer = buffer.partition(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                headers = {}
                for line in lines[1:]:
                    if line:
                        name, _, value = line.partition(":")
                        headers[name.strip().lower()] = value.strip()
                length = int(headers.get("content-length", "0"))
                while len(buffer) < length:
                    data = await reader.read(65536)
                    if not data:
                        return
                    buffer += data
                body, buffer = buffer[:length], buffer[length:]
                recorded = Recorded(method, path, headers, body)
                self.requests.append(recorded)
                reply = self.responder(recorded) if self.responder is not None else None
                if reply is None:
                    reply = self.replies.popleft() if self.replies else self.default
                alive, buffer = await self._answer(reply, reader, writer, buffer)
                if not alive:
                    return
        except ConnectionError:
            pass
        finally:
            self.disconnects.set()
            writer.close()

    async def _answer(
        self,
        reply: Reply,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        buffer: bytes,
    ) -> tuple[bool, bytes]:
        """Send the reply while watching for the peer hanging up (recorded in ``hangups``)."""
        replying = asyncio.ensure_future(self._reply(reply, writer))
        while True:
            reading = asyncio.ensure_future(reader.read(65536))
            await asyncio.wait({reading, replying}, return_when=asyncio.FIRST_COMPLETED)
            if reading.done():
                try:
                    data = reading.result()
                except ConnectionError:  # a reset is a hang-up too
                    data = b""
                if not data:  # the gateway went away while we were answering
                    self.hangups.append(asyncio.get_running_loop().time())
                    self.hung_up.set()
                    replying.cancel()
                    with contextlib.suppress(asyncio.CancelledError, ConnectionError):
                        await replying
                    return False, buffer
                buffer += data  # the next request, already
                if not replying.done():
                    continue
                return replying.result(), buffer
            reading.cancel()
            try:
                data = await reading
            except asyncio.CancelledError:
                return replying.result(), buffer
            return replying.result() and bool(data), buffer + data

    async def _reply(self, reply: Reply, writer: asyncio.StreamWriter) -> bool:
        if reply.delay:
            await asyncio.sleep(reply.delay)
        if reply.status == 0:
            writer.transport.abort()
            return False
        head = [f"HTTP/1.1 {reply.status} X"]
        head += [f"{k}: {v}" for k, v in reply.headers.items()]
        if reply.steps is None:
            head.append(f"content-length: {len(reply.body)}")
            writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + reply.body)
            await writer.drain()
            return True
        head.append("transfer-encoding: chunked")
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode())
        for step in reply.steps:
            if isinstance(step, bytes):
                writer.write(b"%x\r\n%s\r\n" % (len(step), step))
                await writer.drain()
                self.sent_bytes += len(step)
            elif isinstance(step, Pause):
                await asyncio.sleep(step.seconds)
            elif isinstance(step, WaitFor):
                await step.event.wait()
            else:
                writer.transport.abort()
                return False
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        self.closed_streams += 1
        return True


@contextlib.asynccontextmanager
async def responding(responder: Callable[[Recorded], Reply | None]) -> AsyncIterator[FakeUpstream]:
    """A started fake upstream that answers each request with ``responder``'s reply."""
    fake = FakeUpstream()
    fake.responder = responder
    await fake.start()
    try:
        yield fake
    finally:
        await fake.close()
