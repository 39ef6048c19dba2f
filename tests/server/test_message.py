"""Status lines carry the standard reason phrase for every status the gateway sends."""

from __future__ import annotations

import pytest

from sluice.server.message import response_head


@pytest.mark.parametrize(
    ("status", "line"),
    [
        (200, b"HTTP/1.1 200 OK\r\n"),
        (201, b"HTTP/1.1 201 Created\r\n"),  # admin creates
        (409, b"HTTP/1.1 409 Conflict\r\n"),  # a taken name or connection id
        (413, b"HTTP/1.1 413 Content Too Large\r\n"),
        (431, b"HTTP/1.1 431 Request Header Fields Too Large\r\n"),
        (504, b"HTTP/1.1 504 Gateway Timeout\r\n"),
    ],
)
def test_reason_phrases(status: int, line: bytes) -> None:
    assert response_head(status, [("content-length", "0")]).startswith(line)
