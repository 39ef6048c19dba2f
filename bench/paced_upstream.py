"""The stream suite's paced upstream (``bench/streams.py``): an OpenAI-shaped stream of
64 deltas 20 ms apart for every request, all streams written by one ticker; with
``--hold``, one delta and then nothing (idle streams).

    .venv/bin/python -m bench.paced_upstream PORT [--hold]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

import uvloop

HOST = "127.0.0.1"
FRAMES = 64
GAP = 0.020


def _chunk(payload: bytes) -> bytes:
    return b"%x\r\n%b\r\n" % (len(payload), payload)


def _event(delta: dict[str, object], finish: str | None = None) -> bytes:
    doc = {
        "id": "chatcmpl-paced",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": "fake-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return _chunk(b"data: " + json.dumps(doc, separators=(",", ":")).encode() + b"\n\n")


_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
    b"transfer-encoding: chunked\r\n\r\n" + _event({"role": "assistant", "content": ""})
)
_DELTA = _event({"content": "tok"})
_END = _event({}, "stop") + _chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n"


class _Paced(asyncio.Protocol):
    """One client connection: each request gets a stream, paced by the shared ticker."""

    def __init__(self, streams: dict[_Paced, int], hold: bool) -> None:
        self._streams = streams
        self._hold = hold
        self._buffer = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # (uvloop's own class)

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        head, sep, rest = self._buffer.partition(b"\r\n\r\n")
        if not sep:
            return
        length = 0
        for line in head.split(b"\r\n"):
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        if len(rest) < length:
            return
        self._buffer = rest[length:]
        assert self.transport is not None
        self.transport.write(_HEAD + _DELTA)
        if not self._hold:
            self._streams[self] = 1

    def connection_lost(self, exc: Exception | None) -> None:
        self._streams.pop(self, None)


async def _serve_upstream(port: int, hold: bool) -> None:
    streams: dict[_Paced, int] = {}
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: _Paced(streams, hold), HOST, port, backlog=16384)
    async with server:
        tick = loop.time()
        while True:
            tick += GAP
            await asyncio.sleep(max(0.0, tick - loop.time()))
            for stream, sent in list(streams.items()):
                transport = stream.transport
                assert transport is not None
                if sent + 1 >= FRAMES:
                    transport.write(_DELTA + _END)
                    del streams[stream]
                else:
                    transport.write(_DELTA)
                    streams[stream] = sent + 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("port", type=int)
    ap.add_argument("--hold", action="store_true")
    args = ap.parse_args(argv)
    uvloop.run(_serve_upstream(args.port, args.hold))
    return 0


if __name__ == "__main__":
    sys.exit(main())
