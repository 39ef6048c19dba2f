"""A request with a large or chunked body refused on its head: the gate sees the target
and the headers before any of the body is read; what it refuses is answered and the
body dropped as it comes, never parsed or held."""

from __future__ import annotations

import msgspec

from tests.server.http1_harness import LIMITS, Wire

BIG = 2 * 1024 * 1024
ROOMY = msgspec.structs.replace(
    LIMITS, max_body_bytes=4 * BIG, max_buffered_body_bytes=8 * BIG, max_header_bytes=1024
)


def head(length: int | None) -> bytes:
    framing = "Transfer-Encoding: chunked" if length is None else f"Content-Length: {length}"
    return f"POST /v1/chat/completions HTTP/1.1\r\nHost: a\r\n{framing}\r\n\r\n".encode()


async def test_a_refused_head_is_answered_and_its_body_never_held() -> None:
    asked: list[tuple[bytes, dict[bytes, bytes]]] = []

    def gate(target: bytes, headers: list[tuple[bytes, bytes]]) -> tuple[int, str] | None:
        asked.append((target, dict(headers)))
        return 429, "not now"

    wire = Wire(ROOMY, head_gate=gate)
    wire.send(head(BIG), b"x" * 65536)
    await wire.settle()
    (reply,) = wire.replies
    assert reply.status == 429 and reply.headers["connection"] == "close"
    assert wire.seen == []  # no handler ran
    assert wire.intake.bytes == 0 and wire.intake.bodies == 0  # nothing of it was kept
    assert asked == [(b"/v1/chat/completions", {b"Host": b"a", b"Content-Length": b"%d" % BIG})]
    wire.close()


async def test_small_bodies_are_not_asked_about_and_a_let_in_head_is_served() -> None:
    asked: list[bytes] = []

    def gate(target: bytes, headers: list[tuple[bytes, bytes]]) -> tuple[int, str] | None:
        asked.append(target)
        return None

    wire = Wire(ROOMY, head_gate=gate)
    wire.send(head(2) + b"hi")
    await wire.settle()
    wire.send(head(None) + b"2\r\nhi\r\n0\r\n\r\n")  # chunked: a length not declared
    await wire.settle()
    assert [r.status for r in wire.replies] == [200, 200]
    assert asked == [b"/v1/chat/completions"]  # the chunked one only
    wire.close()
