"""A TCP proxy in front of a gateway that cuts its first connection after the answer
passed a given number of bytes (a phone changing networks, a proxy's idle cut); later
connections pass whole. For the clients' resume tests."""

from __future__ import annotations

import asyncio
import contextlib


class CuttingProxy:
    def __init__(self, host: str, port: int, cut_after: int) -> None:
        self._target = (host, port)
        self._cut_after = cut_after
        self.connections = 0
        self.cuts = 0
        self.port = 0
        self._server: asyncio.Server | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        limit = self._cut_after if self.connections == 1 else None
        up_reader, up_writer = await asyncio.open_connection(*self._target)
        ahead = asyncio.ensure_future(_pipe(reader, up_writer, None))
        back = asyncio.ensure_future(_pipe(up_reader, writer, limit))
        await asyncio.wait({ahead, back}, return_when=asyncio.FIRST_COMPLETED)
        if back.done() and back.result():
            self.cuts += 1
        for task in (ahead, back):
            task.cancel()
        for stream in (writer, up_writer):
            stream.transport.abort()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(ahead, back, return_exceptions=True)


async def _pipe(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, limit: int | None
) -> bool:
    """Copy until EOF; True when it stopped at ``limit`` bytes (a cut)."""
    sent = 0
    while data := await reader.read(4096):
        if limit is not None and sent + len(data) >= limit:
            writer.write(data[: max(0, limit - sent)])
            await writer.drain()
            return True
        writer.write(data)
        await writer.drain()
        sent += len(data)
    return False
