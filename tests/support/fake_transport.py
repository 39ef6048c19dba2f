"""An in-memory :class:`~sluice.transport.port.Transport` for unit tests of the router
and the exchange: no sockets. Each connection (the first label of its ``base_url`` host,
as :func:`connection` builds it) answers from its own queue of scripted answers, and
every request sent is recorded.

A :class:`ScriptedResponse` plays the upstream's body one step per ``read_chunk``:
bytes are handed over, an exception is raised, an :class:`asyncio.Event` is waited
for (never set: the upstream hangs). It records whether it was closed, released and
watched, so a test can tell what the code under test did with the connection.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from sluice.core.connection import ConnectionSettings, Secret, Timeouts
from sluice.core.upstream_request import UpstreamRequest
from sluice.transport.port import UpstreamResponse

Step = bytes | BaseException | asyncio.Event
FIXTURES = Path(__file__).parent.parent / "fixtures" / "openai"


def fixture(name: str) -> bytes:
    """A recorded OpenAI stream (``tests/fixtures/openai/<name>.raw``), exactly as sent."""
    return (FIXTURES / f"{name}.raw").read_bytes()


def events(raw: bytes) -> list[bytes]:
    """A recorded stream split into its SSE events, one upstream read each."""
    return [part + b"\n\n" for part in raw.split(b"\n\n") if part.strip()]


class FakeClock:
    """A monotonic clock that moves only when told to."""

    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class ScriptedResponse:
    """One upstream response; after the last step the body ends (``b""``)."""

    def __init__(
        self,
        steps: Iterable[Step] = (),
        status: int = 200,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.status = status
        self.headers: Mapping[str, str] = dict(headers or {})
        self._steps: deque[Step] = deque(steps)
        self.closed = False
        self.released = False
        self.stall: float | None = None
        self.reads = 0
        self.body_limit: int | None = None

    @classmethod
    def json(cls, doc: Any, status: int = 200, **headers: str) -> ScriptedResponse:
        return cls([json.dumps(doc).encode()], status, headers)

    @property
    def left(self) -> int:
        """Steps not read yet."""
        return len(self._steps)

    async def read_chunk(self) -> bytes:
        if self.closed or self.released:
            raise AssertionError("read from a response that was closed or released")
        self.reads += 1
        while self._steps:
            step = self._steps.popleft()
            if isinstance(step, asyncio.Event):
                await step.wait()
            elif isinstance(step, BaseException):
                raise step
            elif step:
                return step
        return b""

    async def read_body(self, limit: int) -> bytes:
        self.body_limit = limit
        parts: list[bytes] = []
        while sum(map(len, parts)) < limit and (data := await self.read_chunk()):
            parts.append(data)
        return b"".join(parts)[:limit]

    def close(self) -> None:
        self.closed = True

    def watch(self, stall: float) -> None:
        self.stall = stall

    def release(self) -> None:
        self.released = True


Answer = ScriptedResponse | BaseException | asyncio.Event
"""What a connection does with the next request: respond, raise from ``send``, or hang."""


class Sent:
    """One request as the transport received it."""

    def __init__(self, conn: str, req: UpstreamRequest, fresh: bool, guarded: bool) -> None:
        self.conn = conn
        self.url = req.url
        self.headers = req.headers
        self.body: Any = json.loads(req.body)
        self.fresh = fresh
        self.guarded = guarded


class FakeTransport:
    """A test double of :class:`~sluice.transport.port.Transport` (mypy checks it where
    it is passed as one). ``send_seconds``: how far ``clock`` moves per request
    (attempt latencies)."""

    def __init__(
        self,
        answers: Mapping[str, Iterable[Answer]] | None = None,
        *,
        clock: FakeClock | None = None,
        send_seconds: float = 0.0,
        signing: tuple[str, ...] = (),
    ) -> None:
        self.answers = {conn: deque(items) for conn, items in (answers or {}).items()}
        self.sent: list[Sent] = []
        self.responses: list[ScriptedResponse] = []
        self.on_send: Callable[[Sent], None] | None = None
        self._fake_clock = clock
        self._send_seconds = send_seconds
        self._signing = signing

    async def start(self) -> None:
        """Nothing to open."""

    async def close(self) -> None:
        """Nothing to close."""

    def signing_secrets(self) -> tuple[str, ...]:
        return self._signing

    async def send(
        self,
        req: UpstreamRequest,
        timeouts: Timeouts,
        *,
        guarded: bool = False,
        fresh: bool = False,
    ) -> UpstreamResponse:
        conn = (urlsplit(req.url).hostname or "").split(".")[0]
        sent = Sent(conn, req, fresh, guarded)
        self.sent.append(sent)
        if self._fake_clock is not None:
            self._fake_clock.advance(self._send_seconds)
        if self.on_send is not None:
            self.on_send(sent)
        queue = self.answers.get(conn)
        if not queue:
            raise AssertionError(f"no answer scripted for {conn} (request {len(self.sent)})")
        answer = queue.popleft()
        if isinstance(answer, asyncio.Event):
            await answer.wait()
            raise AssertionError("a hanging answer was released")
        if isinstance(answer, BaseException):
            raise answer
        self.responses.append(answer)
        return answer

    def sent_to(self) -> list[tuple[str, bool]]:
        """``(connection, fresh)`` of every request, in order."""
        return [(s.conn, s.fresh) for s in self.sent]


UPSTREAM_KEY = "sk-upstream-SECRET-0123456789abcdef"


def connection(
    conn_id: str,
    *,
    timeouts: Timeouts | None = None,
    on_disconnect: str = "cancel",
    weight: float = 1.0,
    key: str | None = UPSTREAM_KEY,
) -> ConnectionSettings:
    """An ``openai-compatible`` connection the fake transport knows by ``conn_id``."""
    return ConnectionSettings(
        id=conn_id,
        provider="openai-compatible",
        base_url=f"http://{conn_id}.upstream.test/v1",
        api_key=None if key is None else Secret(key),
        timeouts=timeouts or Timeouts(),
        on_disconnect=on_disconnect,
        weight=weight,
    )
