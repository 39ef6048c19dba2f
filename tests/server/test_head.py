"""What a request head must be before a handler sees it (RFC 9112), rule by rule."""

from __future__ import annotations

from pathlib import Path

import pytest

from sluice.server.head import content_length, head_problem, header_fields
from tests.support.gateway import running_gateway
from tests.support.raw_http import exchange

H = b"host"


@pytest.mark.parametrize(
    ("version", "headers", "status"),
    [
        ("1.1", [(H, b"gateway.test")], None),
        ("1.1", [(b"Host", b"gateway.test:8787")], None),
        ("1.1", [(H, b"127.0.0.1:1")], None),
        ("1.1", [(H, b"[::1]:8787")], None),
        ("1.1", [(H, b"")], None),  # an empty authority is sent as an empty Host
        ("1.0", [], None),  # HTTP/1.0 may leave it out
        ("1.1", [], 400),
        ("1.1", [(H, b"a"), (H, b"a")], 400),
        ("1.0", [(H, b"a"), (H, b"b")], 400),
        ("1.1", [(H, b"a, b")], 400),
        ("1.1", [(H, b"a b")], 400),
        ("1.1", [(H, b"a/b")], 400),
        ("1.1", [(H, b"user@a")], 400),
        ("1.1", [(H, b"a:99999")], 400),
        ("1.1", [(H, b"a:0")], 400),
        ("1.1", [(H, b"a:x")], 400),
        ("1.1", [(H, b"[::1")], 400),
        ("0.9", [(H, b"a")], 505),
        ("2.0", [(H, b"a")], 505),
        ("1.1", [(H, b"a"), (b"Transfer-Encoding", b"chunked")], None),
        ("1.1", [(H, b"a"), (b"transfer-encoding", b" Chunked ")], None),
        ("1.1", [(H, b"a"), (b"Transfer-Encoding", b"gzip, chunked")], 501),
        ("1.1", [(H, b"a"), (b"Transfer-Encoding", b"identity, chunked")], 501),
        (
            "1.1",
            [(H, b"a"), (b"Transfer-Encoding", b"gzip"), (b"Transfer-Encoding", b"chunked")],
            501,
        ),
    ],
)
def test_head_rules(version: str, headers: list[tuple[bytes, bytes]], status: int | None) -> None:
    problem = head_problem(version, headers)
    assert (problem[0] if problem else None) == status


def test_fields_fold_repeated_headers_and_read_the_length() -> None:
    raw = [(b"Accept", b"a"), (b"X-Thing", b"1"), (b"accept", b"b"), (b"Content-Length", b"12")]
    assert header_fields(raw) == {"accept": "a, b", "x-thing": "1", "content-length": "12"}
    assert content_length(raw) == 12 and content_length([]) is None


@pytest.mark.parametrize(
    ("head", "status"),
    [
        (b"GET /v1/models HTTP/1.1\r\n\r\n", 400),
        (b"GET /v1/models HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400),
        (b"GET /v1/models HTTP/1.0\r\n\r\n", 401),  # served (and needs a key)
        (b"GET /v1/models\r\n\r\n", 505),
    ],
    ids=["no-host", "two-hosts", "http10-without-host", "http09"],
)
async def test_the_gateway_refuses_such_heads_before_any_handler(
    tmp_path: Path, head: bytes, status: int
) -> None:
    async with running_gateway(tmp_path) as gw:
        resp = await exchange(gw.host, gw.port, head)
    assert resp.status == status
