"""Pipelining on one connection: responses in request order; reading paused while
requests wait; a refused request answered after the ones before it; ``100 Continue``
only when it is a request's turn and its body has not begun."""

from __future__ import annotations

import asyncio
import json

import pytest

from sluice.server.message import Request, ResponseWriter
from sluice.server.pipeline import LIMIT, PAUSE_AT
from tests.server.http1_harness import LIMITS, Wire, splits


def get(path: str, extra: bytes = b"") -> bytes:
    return b"GET %s HTTP/1.1\r\nHost: gateway.test\r\n%s\r\n" % (path.encode(), extra)


def post(path: str, body: bytes, extra: bytes = b"") -> bytes:
    head = b"POST %s HTTP/1.1\r\nHost: gateway.test\r\n%s" % (path.encode(), extra)
    return head + b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


def chunked(path: str, body: bytes) -> bytes:
    head = b"POST %s HTTP/1.1\r\nHost: gateway.test\r\nTransfer-Encoding: chunked\r\n\r\n"
    return head % path.encode() + b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)


EXPECT = b"Expect: 100-continue\r\n"
EXPECT_HEAD = post("/p", b"hello", EXPECT).removesuffix(b"hello")


class Turnstile:
    """A handler that answers one request per :meth:`release`."""

    def __init__(self) -> None:
        self._turns = asyncio.Semaphore(0)

    def release(self, turns: int = 1) -> None:
        for _ in range(turns):
            self._turns.release()

    async def respond(self, request: Request, writer: ResponseWriter) -> None:
        await self._turns.acquire()
        await writer.send(200, [], b"%s %s" % (request.path.encode(), bytes(request.body)))


def answers(wire: Wire) -> list[tuple[int, bytes]]:
    return [(r.status, r.body) for r in wire.replies]


def balanced(wire: Wire) -> bool:
    wire.close()
    return (wire.intake.bodies, wire.intake.bytes) == (0, 0)


async def test_pipelined_requests_are_answered_in_order_at_every_split() -> None:
    raw = get("/a") + post("/b", b"hello") + chunked("/c", b"xyz") + get("/d")
    expected = [(200, b"/a "), (200, b"/b hello"), (200, b"/c xyz"), (200, b"/d ")]
    for pieces in splits(raw):
        wire = Wire()
        wire.send(*pieces)
        await wire.settle()
        assert answers(wire) == expected, [len(p) for p in pieces]
        assert not wire.transport.closed
        assert balanced(wire)


async def test_reading_pauses_while_requests_wait_and_resumes_once_all_are_served() -> None:
    turn = Turnstile()
    wire = Wire(respond=turn.respond)
    for i in range(PAUSE_AT + 1):  # one served, PAUSE_AT held
        assert wire.transport.reading, i
        wire.send(get(f"/{i}"))
    await wire.settle()
    assert not wire.transport.reading and wire.transport.pauses == 1
    wire.send(get("/late"))  # stays in the socket while reading is paused
    assert len(wire.seen) == 1 and wire.transport.backlog
    for served in range(1, PAUSE_AT):
        turn.release()
        await wire.settle()
        assert len(wire.replies) == served and not wire.transport.reading, served
    turn.release()  # the last one held starts: reading resumes, the late request is read
    await wire.settle()
    assert wire.transport.reading and not wire.transport.backlog
    turn.release(2)
    await wire.settle()
    paths = [f"/{i} ".encode() for i in range(PAUSE_AT + 1)] + [b"/late "]
    assert answers(wire) == [(200, path) for path in paths]
    assert balanced(wire)


async def test_a_read_past_the_limit_is_answered_up_to_it_then_refused() -> None:
    wire = Wire()
    wire.send(b"".join(get(f"/{i}") for i in range(LIMIT + 5)))
    await wire.settle()
    replies = wire.replies
    served = LIMIT + 1  # the one in flight and LIMIT held
    assert [r.body for r in replies[:served]] == [f"/{i} ".encode() for i in range(served)]
    assert [r.status for r in replies] == [200] * served + [503]
    assert replies[-1].headers["connection"] == "close"
    assert json.loads(replies[-1].body)["error"]["code"] == "server_busy"
    assert len(wire.seen) == served and wire.transport.eof
    assert balanced(wire)


OVER = LIMITS.max_body_bytes + 1
BAD_FOLLOWERS = (
    ("two Hosts", get("/x", b"Host: other\r\n"), 400),
    ("space before the colon", b"GET /x HTTP/1.1\r\nHost : a\r\n\r\n", 400),
    ("CL and TE", post("/x", b"0\r\n\r\n", b"Transfer-Encoding: chunked\r\n"), 400),
    ("TE: identity", b"POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: identity\r\n\r\n", 400),
    ("body over the limit", post("/x", b"a" * OVER), 413),
    ("chunk over the limit", chunked("/x", b"a" * OVER), 413),
    ("head too large", get("/x", b"X-Big: %s\r\n" % (b"a" * LIMITS.max_header_bytes)), 431),
    ("HTTP/2 preface", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 400),
    ("HTTP/2.0", b"GET /x HTTP/2.0\r\nHost: a\r\n\r\n", 505),
    ("Upgrade", get("/x", b"Connection: upgrade\r\nUpgrade: h2c\r\n"), 400),
    ("Expect, over the limit", post("/x", b"a" * OVER, EXPECT), 413),
)


@pytest.mark.parametrize("settle_between", [False, True], ids=["at-once", "settled"])
@pytest.mark.parametrize(
    ("name", "bad", "status"), BAD_FOLLOWERS, ids=[b[0] for b in BAD_FOLLOWERS]
)
async def test_a_refused_request_is_answered_after_the_ones_before_it(
    name: str, bad: bytes, status: int, settle_between: bool
) -> None:
    """Whether the requests before it are still being served when the bad one arrives
    (every piece sent ``at-once``) or, at some cuts, already answered (the handlers run
    between pieces: ``settled``), each gets its answer, then the refusal; nothing after
    the bad request is read."""
    raw = get("/a") + post("/b", b"hi") + bad + get("/never")
    for pieces in splits(raw):
        wire = Wire()
        for piece in pieces:
            wire.send(piece)
            if settle_between:
                await wire.settle()
        await wire.settle()
        cut = f"{name}: cut {[len(p) for p in pieces]}"
        assert [r.status for r in wire.replies] == [200, 200, status], cut
        assert [r.path for r in wire.seen] == ["/a", "/b"], cut
        assert wire.replies[-1].headers["connection"] == "close", cut
        assert wire.transport.eof and wire.transport.writes_after_close == 0, cut
        assert balanced(wire), cut


@pytest.mark.parametrize(
    "last",
    [get("/a", b"Connection: close\r\n"), b"GET /a HTTP/1.0\r\n\r\n"],
    ids=["Connection: close", "HTTP/1.0"],
)
async def test_bytes_after_the_last_request_are_ignored(last: bytes) -> None:
    for pieces in splits(last + get("/b") + b"garbage\r\n\r\n"):
        wire = Wire()
        wire.send(*pieces)
        await wire.settle()
        assert answers(wire) == [(200, b"/a ")], [len(p) for p in pieces]
        assert wire.replies[0].headers["connection"] == "close"
        assert wire.transport.closed and [r.path for r in wire.seen] == ["/a"]
        assert balanced(wire)


async def test_100_continue_only_when_the_head_came_without_any_of_its_body() -> None:
    for pieces in splits(EXPECT_HEAD + b"hello"):
        head_alone = EXPECT_HEAD in pieces or len(pieces) > 2  # byte by byte: its end alone
        wire = Wire()
        wire.send(*pieces)
        await wire.settle()
        expected = [(100, b""), (200, b"/p hello")] if head_alone else [(200, b"/p hello")]
        assert answers(wire) == expected, [len(p) for p in pieces]
        assert balanced(wire)


async def test_no_100_continue_for_http10() -> None:
    wire = Wire()
    wire.send(EXPECT_HEAD.replace(b"HTTP/1.1", b"HTTP/1.0"))
    await wire.settle()
    assert answers(wire) == []
    wire.send(b"hello")
    await wire.settle()
    assert answers(wire) == [(200, b"/p hello")]
    assert balanced(wire)


async def test_100_continue_for_a_chunked_body_not_yet_begun() -> None:
    head, body = chunked("/p", b"hello").split(b"\r\n\r\n", 1)
    head = head + b"\r\n" + EXPECT + b"\r\n"
    wire = Wire()
    wire.send(head)
    assert answers(wire) == [(100, b"")]
    wire.send(body)
    await wire.settle()
    assert answers(wire) == [(100, b""), (200, b"/p hello")]
    for begun in (body[:3], body[:-1], body):  # a chunk's header, most of it, all of it
        wire = Wire()
        wire.send(head + begun)
        await wire.settle()
        assert [r.status for r in wire.replies] == ([200] if begun == body else []), begun
        assert balanced(wire)


async def test_a_pipelined_expect_gets_100_once_the_response_before_it_is_done() -> None:
    turn = Turnstile()
    wire = Wire(respond=turn.respond)
    wire.send(get("/a") + EXPECT_HEAD)
    await wire.settle()
    assert answers(wire) == []  # never in the middle of another response
    turn.release()
    await wire.settle()
    assert answers(wire) == [(200, b"/a "), (100, b"")]
    wire.send(b"hello")
    turn.release()
    await wire.settle()
    assert answers(wire) == [(200, b"/a "), (100, b""), (200, b"/p hello")]
    assert balanced(wire)


@pytest.mark.parametrize("sent", [b"he", b"hello"], ids=["part of its body", "all of it"])
async def test_a_pipelined_expect_whose_body_came_gets_no_100(sent: bytes) -> None:
    for pieces in splits(get("/a") + EXPECT_HEAD + sent):
        turn = Turnstile()
        wire = Wire(respond=turn.respond)
        wire.send(*pieces)
        turn.release()
        await wire.settle()
        wire.send(b"hello"[len(sent) :])
        turn.release()
        await wire.settle()
        assert answers(wire) == [(200, b"/a "), (200, b"/p hello")], [len(p) for p in pieces]
        assert balanced(wire)


async def test_a_refused_expect_gets_no_100_before_or_after_the_response_before_it() -> None:
    turn = Turnstile()
    wire = Wire(respond=turn.respond)
    wire.send(get("/a") + post("/x", b"", EXPECT).replace(b"Length: 0", b"Length: %d" % OVER))
    await wire.settle()
    turn.release()
    await wire.settle()
    assert [r.status for r in wire.replies] == [200, 413]
    assert balanced(wire)
