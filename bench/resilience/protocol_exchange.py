"""A raw HTTP/1.1 exchange for the protocol rows, that survives whatever the gateway does:
the request head and body built byte by byte, sent on a socket of its own, one or more
responses read back (or none, when the gateway closes or stalls first).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from bench.resilience.harness import Gateway
from tests.support.raw_http import RawClient, RawResponse


@dataclass
class Answer:
    status: int | None
    """``None``: no answer (the connection closed or timed out first)."""
    headers: dict[str, str]
    body: bytes
    seconds: float
    error: str | None = None
    statuses: list[int] = field(default_factory=list)
    """Every status read, when more than one response was read (pipelining)."""

    def json(self) -> Any:
        try:
            return json.loads(self.body)
        except ValueError:
            return None


async def send(
    host: str,
    port: int,
    head: bytes,
    body: bytes = b"",
    *,
    stream: Callable[[], bytes | None] | None = None,
    wait: float = 10.0,
    head_only: bool = False,
    responses: int = 1,
) -> Answer:
    """Send ``head + body`` (then, if ``stream``, its pieces until it returns ``None`` or
    an answer arrives) and read one response (``head_only``: its head, for HEAD), or
    ``responses`` of them (the answer is the last; ``statuses`` has them all)."""
    started = time.monotonic()
    try:
        client = await asyncio.wait_for(RawClient.connect(host, port), wait)
    except (OSError, TimeoutError) as exc:
        return Answer(None, {}, b"", 0.0, f"connect: {exc!r}")
    reading: asyncio.Task[RawResponse] = asyncio.ensure_future(
        _read_head(client) if head_only else client.read_response()
    )
    try:
        with contextlib.suppress(ConnectionError):
            await client.send(head + body)
            while stream is not None and not reading.done():
                piece = stream()
                if piece is None:
                    break
                await client.send(piece)
        resp = await asyncio.wait_for(reading, wait)
        statuses = [resp.status]
        for _ in range(responses - 1):
            resp = await asyncio.wait_for(client.read_response(), wait)
            statuses.append(resp.status)
        return Answer(
            resp.status, resp.headers, resp.body, time.monotonic() - started, None, statuses
        )
    except (TimeoutError, asyncio.IncompleteReadError, ConnectionError, ValueError) as exc:
        reading.cancel()
        return Answer(None, {}, b"", time.monotonic() - started, type(exc).__name__)
    finally:
        if not reading.done():
            reading.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await reading
        await client.close()


async def _read_head(client: RawClient) -> RawResponse:
    status, headers = await client.read_head()
    return RawResponse(status, headers, b"")


def envelope_ok(answer: Answer) -> bool:
    """The JSON error envelope: ``{"error": {"message", "type", "code", "param"}}``."""
    doc = answer.json()
    if not isinstance(doc, dict) or set(doc) != {"error"} or not isinstance(doc["error"], dict):
        return False
    error = doc["error"]
    return (
        set(error) == {"message", "type", "code", "param"}
        and isinstance(error["message"], str)
        and isinstance(error["type"], str)
        and (error["code"] is None or isinstance(error["code"], str))
        and (error["param"] is None or isinstance(error["param"], str))
    )


def chat_body(marker: str) -> bytes:
    doc = {"model": "test/gpt-fake", "messages": [{"role": "user", "content": marker}]}
    return json.dumps(doc).encode()


def feeder(parts: Iterable[bytes]) -> Callable[[], bytes | None]:
    """The pieces of a streamed body, one per call; ``None`` after the last."""
    it = iter(parts)
    return lambda: next(it, None)


def request_head(
    method: str, path: str, key: str | None, length: int | None, extra: str = ""
) -> bytes:
    auth = f"Authorization: Bearer {key}\r\n" if key else ""
    framing = f"Content-Length: {length}\r\n" if length is not None else ""
    return (
        f"{method} {path} HTTP/1.1\r\nHost: gateway.test\r\n{auth}"
        f"Content-Type: application/json\r\n{framing}{extra}\r\n"
    ).encode()


async def call(gw: Gateway, method: str, path: str, key: str | None, body: bytes = b"") -> Answer:
    return await send(gw.host, gw.port, request_head(method, path, key, len(body)), body)


async def bounded(jobs: Iterable[Awaitable[Answer]], limit: int = 16) -> list[Answer]:
    gate = asyncio.Semaphore(limit)

    async def one(job: Awaitable[Answer]) -> Answer:
        async with gate:
            return await job

    return await asyncio.gather(*(one(j) for j in jobs))
