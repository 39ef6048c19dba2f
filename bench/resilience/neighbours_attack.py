"""One tenant at full tilt on one path, in a process of its own (run niced by the
noisy-neighbour rows, so that the harness measuring the bystander keeps its core):

    python -m bench.resilience.neighbours_attack PATH HOST PORT KEY SECONDS CONNECTIONS

Each connection sends the path's request again as soon as the last answer is read (a
closed loop, keep-alive; a new connection when the gateway closes one). Live feeds are
opened and read (``live``) or opened and never read (``live-unread``, ``slow``: a
stream whose answer is never read). Prints one JSON line: the answers by status and
how many requests were sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time
from collections import Counter
from typing import Final

from tests.support.raw_http import RawClient

HUGE_TOOLS: Final = 100_000


def huge_body(model: str) -> bytes:
    """A valid chat request of about 7.6 MB: one message and 100,000 small tools."""
    tool = {
        "type": "function",
        "function": {"name": "t", "parameters": {"type": "object", "properties": {}}},
    }
    tools = json.dumps([tool] * HUGE_TOOLS)
    return b'{"model":"%b","messages":[{"role":"user","content":"hi"}],"tools":%b}' % (
        model.encode(),
        tools.encode(),
    )


def _request(method: str, path: str, key: str, body: bytes = b"", extra: str = "") -> bytes:
    head = f"{method} {path} HTTP/1.1\r\nHost: gateway.test\r\nAuthorization: Bearer {key}\r\n"
    if body:
        head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
    return (head + extra + "\r\n").encode() + body


def requests_for(path: str, key: str) -> bytes:
    """The request one connection sends again and again on ``path``."""
    chat = b'{"model":"test/gpt-fake","messages":[{"role":"user","content":"hi"}]}'
    messages = (
        b'{"model":"test/claude-fake","max_tokens":16,'
        b'"messages":[{"role":"user","content":"count me"}]}'
    )
    table = {
        "listing": _request("GET", "/v1/requests?status=error&limit=100", key),
        "lookup": _request("GET", "/v1/requests/req_doesnotexist0000000000", key),
        "spend": _request("GET", "/v1/spend?by=model", key),
        "models": _request("GET", "/v1/models", key),
        "refused": _request("POST", "/v1/chat/completions", key, chat),
        "huge": _request("POST", "/v1/chat/completions", key, huge_body("test/gpt-fake")),
        "count_tokens": _request("POST", "/v1/messages/count_tokens", key, messages),
        "live": _request("GET", "/v1/requests/live?interval_ms=100", key),
        "live-unread": _request("GET", "/v1/requests/live?interval_ms=100", key),
        "slow": _request(
            "POST",
            "/v1/chat/completions",
            key,
            b'{"model":"test/gpt-big","stream":true,"messages":[{"role":"user","content":"x"}]}',
        ),
    }
    return table[path]


class Tally:
    def __init__(self, connections: int) -> None:
        self.statuses: Counter[str] = Counter()
        self.sent = 0
        self._first = connections
        self.under_way = asyncio.Event()
        """Every connection has sent its first request."""

    def sending(self) -> None:
        self.sent += 1
        if self.sent == self._first:
            self.under_way.set()


async def _closed_loop(host: str, port: int, request: bytes, end: float, tally: Tally) -> None:
    while time.monotonic() < end:
        try:
            client = await RawClient.connect(host, port)
        except OSError as exc:
            tally.statuses[type(exc).__name__] += 1
            await asyncio.sleep(0.01)
            continue
        try:
            while time.monotonic() < end:
                tally.sending()
                await client.send(request)
                response = await client.read_response()
                tally.statuses[str(response.status)] += 1
                if response.headers.get("connection") == "close":
                    break
        except (OSError, asyncio.IncompleteReadError, ValueError) as exc:
            tally.statuses[type(exc).__name__] += 1
        finally:
            await client.close()


async def _held_open(
    host: str, port: int, request: bytes, end: float, tally: Tally, *, read: bool
) -> None:
    """Open a long answer (a feed, a big stream) and keep it: read it, or never read it.
    When the gateway refuses or ends it, open another."""
    while time.monotonic() < end:
        try:
            client = await RawClient.connect(host, port)
        except OSError as exc:
            tally.statuses[type(exc).__name__] += 1
            await asyncio.sleep(0.01)
            continue
        try:
            tally.sending()
            await client.send(request)
            status, _ = await client.read_head()
            tally.statuses[str(status)] += 1
            async with asyncio.timeout(max(0.0, end - time.monotonic())):
                if status != 200 or read:
                    while await client.reader.read(65536):
                        pass
                else:
                    await asyncio.sleep(end - time.monotonic())
        except TimeoutError:
            pass
        except (OSError, asyncio.IncompleteReadError, ValueError) as exc:
            tally.statuses[type(exc).__name__] += 1
        finally:
            await client.close()


async def attack(path: str, host: str, port: int, key: str, *, seconds: float, n: int) -> Tally:
    request = requests_for(path, key)
    end = time.monotonic() + seconds
    tally = Tally(n)
    if path in ("live", "live-unread", "slow"):
        read = path == "live"
        work = [_held_open(host, port, request, end, tally, read=read) for _ in range(n)]
    else:
        work = [_closed_loop(host, port, request, end, tally) for _ in range(n)]
    running = asyncio.gather(*work)
    with contextlib.suppress(TimeoutError):  # (or a second on, if some cannot connect)
        await asyncio.wait_for(tally.under_way.wait(), 1.0)
    print("started", flush=True)  # the harness's warm-up counts from here
    with contextlib.suppress(asyncio.CancelledError):
        await running
    return tally


def main() -> int:
    path, host, port, key, seconds, connections = sys.argv[1:7]
    tally = asyncio.run(
        attack(path, host, int(port), key, seconds=float(seconds), n=int(connections))
    )
    print(json.dumps({"sent": tally.sent, "statuses": dict(tally.statuses)}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
