"""Whether a connection outlives its response (RFC 9112 §9.3), and which timer runs
while it waits for the next request."""

from __future__ import annotations

import asyncio

import msgspec
import pytest

from tests.server.http1_harness import LIMITS, Wire

PERSISTS = (
    ("1.1", b"GET /a HTTP/1.1\r\nHost: a\r\n\r\n", True),
    ("1.1 Connection: close", b"GET /a HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", False),
    ("1.1 Connection: Close", b"GET /a HTTP/1.1\r\nHost: a\r\nConnection: Close\r\n\r\n", False),
    ("1.0", b"GET /a HTTP/1.0\r\n\r\n", False),
    ("1.0 Connection: keep-alive", b"GET /a HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", True),
    ("1.0 Connection: Keep-Alive", b"GET /a HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", True),
    (
        "1.0 keep-alive, a chunked body",
        b"POST /a HTTP/1.0\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"0\r\n\r\n",
        False,
    ),
    (
        "1.0 keep-alive, a Content-Length body",
        b"POST /a HTTP/1.0\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nhi",
        True,
    ),
)


@pytest.mark.parametrize(("name", "raw", "persists"), PERSISTS, ids=[p[0] for p in PERSISTS])
async def test_the_connection_persists_when_the_request_asks(
    name: str, raw: bytes, persists: bool
) -> None:
    wire = Wire()
    wire.send(raw)
    await wire.settle()
    (reply,) = wire.replies
    assert reply.status == 200
    assert wire.transport.closed is not persists
    assert (reply.headers.get("connection") == "close") is not persists
    wire.send(raw)  # a closed connection reads nothing more
    await wire.settle()
    assert len(wire.replies) == (2 if persists else 1)
    wire.close()


SHORT = 0.05


async def _answer_then_wait(sent: bytes, **seconds: float) -> Wire:
    """A GET answered with ``sent`` (the start of another request) already read, then
    four times ``SHORT``."""
    limits = msgspec.structs.replace(LIMITS, **seconds)
    gate = asyncio.Event()
    wire = Wire(limits)
    wire.gate = gate
    wire.send(b"GET /a HTTP/1.1\r\nHost: a\r\n\r\n" + sent)
    await wire.settle()
    gate.set()
    await wire.settle()
    await asyncio.sleep(4 * SHORT)
    await wire.settle()
    return wire


@pytest.mark.parametrize(
    ("sent", "timer"),
    [
        (b"GET /b HTTP/1.1\r\nHo", "header_timeout"),
        (b"POST /b HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhe", "body_timeout"),
    ],
    ids=["a head", "a body"],
)
async def test_a_request_begun_during_a_response_gets_its_own_timer_after_it(
    sent: bytes, timer: str
) -> None:
    wire = await _answer_then_wait(sent, **{timer: SHORT})
    assert [r.status for r in wire.replies] == [200, 408]
    assert wire.transport.eof
    wire.close()


@pytest.mark.parametrize(
    ("sent", "timer"),
    [
        (b"GET /b HTTP/1.1\r\nHo", "keepalive_timeout"),
        (b"POST /b HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhe", "keepalive_timeout"),
        (b"POST /b HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhe", "header_timeout"),
    ],
    ids=["a head, keep-alive", "a body, keep-alive", "a body, header"],
)
async def test_other_timers_do_not_cut_a_request_begun_during_a_response(
    sent: bytes, timer: str
) -> None:
    wire = await _answer_then_wait(sent, **{timer: SHORT})
    assert [r.status for r in wire.replies] == [200] and not wire.transport.closed
    wire.close()


async def test_an_idle_connection_closes_quietly_after_keepalive_timeout() -> None:
    wire = await _answer_then_wait(b"", keepalive_timeout=SHORT)
    assert [r.status for r in wire.replies] == [200]
    assert wire.transport.closed and not wire.transport.eof
    wire.close()
