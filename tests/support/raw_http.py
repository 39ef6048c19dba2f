"""A raw HTTP/1.1 client for byte-level tests: exact bytes out, exact bytes back."""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
from dataclasses import dataclass, field
from typing import Any


@dataclass
class RawResponse:
    status: int
    headers: dict[str, str]
    body: bytes
    chunks: list[bytes] = field(default_factory=list)  # chunked-encoding pieces, as sent
    complete: bool = True  # the chunked terminator arrived

    def json(self) -> Any:
        return json.loads(self.body)


class RawClient:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    @classmethod
    async def connect(cls, host: str, port: int) -> RawClient:
        reader, writer = await asyncio.open_connection(host, port)
        return cls(reader, writer)

    async def close(self) -> None:
        self.writer.close()
        # A client leaving a TLS stream mid-body may see data after its close_notify.
        with contextlib.suppress(ConnectionError, ssl.SSLError):
            await self.writer.wait_closed()

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def read_head(self) -> tuple[int, dict[str, str]]:
        head = await self.reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ")[1])
        headers = {}
        for line in lines[1:]:
            if line:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
        return status, headers

    async def read_chunk(self) -> bytes | None:
        """The next chunk of a chunked body; ``None`` after the terminator."""
        size_line = await self.reader.readuntil(b"\r\n")
        size = int(size_line.strip(), 16)
        data = await self.reader.readexactly(size + 2)
        return None if size == 0 else data[:-2]

    async def read_response(self) -> RawResponse:
        status, headers = await self.read_head()
        if headers.get("transfer-encoding") == "chunked":
            chunks: list[bytes] = []
            complete = True
            try:
                while (piece := await self.read_chunk()) is not None:
                    chunks.append(piece)
            except asyncio.IncompleteReadError:
                complete = False
            return RawResponse(status, headers, b"".join(chunks), chunks, complete)
        if "content-length" in headers:
            body = await self.reader.readexactly(int(headers["content-length"]))
        else:
            body = await self.reader.read()
        return RawResponse(status, headers, body)

    async def at_eof(self, wait: float = 2.0) -> bool:
        """True when the server closed the connection."""
        try:
            data = await asyncio.wait_for(self.reader.read(1), wait)
        except (TimeoutError, ConnectionError):
            return False
        return data == b""


def post(path: str, body: bytes, key: str | None, *, extra: str = "") -> bytes:
    auth = f"Authorization: Bearer {key}\r\n" if key else ""
    return (
        f"POST {path} HTTP/1.1\r\nHost: gateway.test\r\n{auth}"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n{extra}\r\n"
    ).encode() + body


def get(path: str, key: str | None, *, extra: str = "") -> bytes:
    auth = f"Authorization: Bearer {key}\r\n" if key else ""
    return f"GET {path} HTTP/1.1\r\nHost: gateway.test\r\n{auth}{extra}\r\n".encode()


async def exchange(host: str, port: int, request: bytes) -> RawResponse:
    client = await RawClient.connect(host, port)
    try:
        await client.send(request)
        return await client.read_response()
    finally:
        await client.close()
