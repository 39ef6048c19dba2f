"""The :class:`~sluice.server.message.Request` a complete message makes, read off the
parser that parsed it."""

from __future__ import annotations

from collections.abc import Sequence

import httptools

from sluice.server.head import header_fields
from sluice.server.message import Request


def parsed_request(
    parser: httptools.HttpRequestParser,
    url: bytes,
    raw_headers: Sequence[tuple[bytes, bytes]],
    body: bytearray,
    received: int,
) -> Request:
    headers = header_fields(raw_headers)
    version: str = parser.get_http_version()
    target = httptools.parse_url(url)
    return Request(
        method=parser.get_method().decode("ascii", "replace"),
        path=(target.path or b"").decode("latin-1"),
        query=(target.query or b"").decode("latin-1"),
        headers=headers,
        body=body,
        received=received,
        version=version,
        # HTTP/1.0 with Transfer-Encoding is unreliable framing: answer, then close
        keep_alive=parser.should_keep_alive()
        and not (version == "1.0" and "transfer-encoding" in headers),
    )
