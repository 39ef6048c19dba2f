"""A fast fake OpenAI-compatible upstream for the benches, so they run without the peer
kit: ``POST /v1/chat/completions`` (or ``/chat/completions``) answers a streamed
request with a role chunk, ``--chunks`` content chunks of ``--chunk-bytes`` bytes, a
finish chunk, a usage chunk when asked, and ``[DONE]``, all in one write (prebuilt), on
HTTP/1.1 keep-alive; a request that does not stream gets the whole answer as JSON.

    .venv/bin/python bench/fake_upstream.py --port 9001 --chunks 20 --chunk-bytes 16
"""

from __future__ import annotations

import argparse
import asyncio
import json

MODEL = "fake-model"


_STREAM_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
)
_DONE = b"data: [DONE]\n\n"


def _event(choices: list[dict[str, object]], **extra: object) -> bytes:
    doc = {
        "id": "chatcmpl-bench",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": MODEL,
        "choices": choices,
        **extra,
    }
    return b"data: " + json.dumps(doc, separators=(",", ":")).encode() + b"\n\n"


def _chunk(delta: dict[str, object], finish: str | None = None) -> bytes:
    return _event([{"index": 0, "delta": delta, "finish_reason": finish}])


def _chunked(events: list[bytes]) -> bytes:
    return b"".join(b"%x\r\n%b\r\n" % (len(e), e) for e in events) + b"0\r\n\r\n"


class Answers:
    """The three answers, built once: a stream with and without usage, and the whole."""

    def __init__(self, chunks: int, chunk_bytes: int) -> None:
        piece = "x" * chunk_bytes
        usage = {"prompt_tokens": 10, "completion_tokens": chunks, "total_tokens": 10 + chunks}
        events = [_chunk({"role": "assistant", "content": ""})]
        events += [_chunk({"content": piece}) for _ in range(chunks)]
        events.append(_chunk({}, "stop"))
        self.stream = _STREAM_HEAD + _chunked([*events, _DONE])
        self.stream_with_usage = _STREAM_HEAD + _chunked([*events, _event([], usage=usage), _DONE])
        message = {"role": "assistant", "content": piece * chunks}
        whole = {
            "id": "chatcmpl-bench",
            "object": "chat.completion",
            "created": 1700000000,
            "model": MODEL,
            "usage": usage,
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        }
        body = json.dumps(whole).encode()
        head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n"
        self.whole = head % len(body) + body


class Upstream(asyncio.Protocol):
    """One connection: requests read by ``content-length``, answered in order."""

    def __init__(self, answers: Answers) -> None:
        self._answers = answers
        self._buffer = b""
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        while (end := self._buffer.find(b"\r\n\r\n")) >= 0:
            head = self._buffer[:end].lower()
            length = 0
            for line in head.split(b"\r\n")[1:]:
                if line.startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
            if len(self._buffer) < end + 4 + length:
                return
            body = self._buffer[end + 4 : end + 4 + length]
            self._buffer = self._buffer[end + 4 + length :]
            assert self._transport is not None
            self._transport.write(self._answer(body))

    def _answer(self, body: bytes) -> bytes:
        compact = body.replace(b" ", b"")
        if b'"stream":true' not in compact:
            return self._answers.whole
        if b'"include_usage":true' in compact:
            return self._answers.stream_with_usage
        return self._answers.stream


async def serve(port: int, answers: Answers) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: Upstream(answers), "127.0.0.1", port)
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description="A fake OpenAI-compatible upstream.")
    parser.add_argument("--port", type=int, default=9001)
    parser.add_argument("--chunks", type=int, default=20)
    parser.add_argument("--chunk-bytes", type=int, default=16)
    args = parser.parse_args()
    asyncio.run(serve(args.port, Answers(args.chunks, args.chunk_bytes)))


if __name__ == "__main__":
    main()
