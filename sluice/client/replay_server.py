"""``sluice replay serve``: recorded streams served over HTTP with faults on the wire,
for the user's own clients (a browser app, a mobile client, a backend in any
language) to be tested against in CI.

``POST /v1/chat/completions`` and ``POST /v1/messages`` answer with a recording (the
files in turn; ``X-Replay-File: <name>`` picks one), with the fault the request's
``X-Replay-Fault`` header names (else the server's default):

- the stream's own faults, as ``sluice replay --fault`` makes them: ``no-done``,
  ``length``, ``error`` (an error event instead of the end), ``comment``, ``crlf``;
- ``split``: every event cut across two TCP writes at a random point;
- ``stall``: the first event, then nothing (the connection stays open);
- ``trickle``: one event at a time, ``--rate`` events per second;
- ``reset``: half the stream, then the connection reset (TCP RST);
- ``cut-and-resume``: a resumable stream as Sluice serves one (an ``id:`` per event,
  ``X-Sluice-Resume-Url``), cut after a random number of events; ``GET`` of the resume
  URL with ``Last-Event-ID`` serves the rest (``DELETE`` forgets it), so a client's
  resume can be tested (docs/api.md#resumable-streams).
"""

from __future__ import annotations

import asyncio
import random
import socket
import struct
from collections.abc import Sequence
from typing import Final, Literal, cast, get_args

import msgspec
from aiohttp import web

from sluice.client.replay import FAULTS, Fault, inject

WireFault = Literal["split", "stall", "trickle", "reset", "cut-and-resume"]
WIRE_FAULTS: Final[tuple[str, ...]] = get_args(WireFault)
SERVED_FAULTS: Final[tuple[str, ...]] = (*(f for f in FAULTS if f != "split"), *WIRE_FAULTS)
PATHS: Final = ("/v1/chat/completions", "/v1/messages")
STALL_SECONDS: Final = 600.0
RESUME_PREFIX: Final = "/v1/streams/"
KEPT_STREAMS: Final = 1000
"""Cut streams kept for a resume (the oldest forgotten first)."""
_HEADERS: Final = (("Content-Type", "text/event-stream"), ("Cache-Control", "no-cache"))


class Recording(msgspec.Struct, frozen=True):
    name: str
    data: bytes


class ReplayServer:
    """The recordings, a default fault and the trickle rate; ``app()`` serves them."""

    def __init__(
        self,
        recordings: Sequence[Recording],
        *,
        fault: str | None = None,
        rate: float = 20.0,
        seed: int | None = None,
    ) -> None:
        if not recordings:
            raise ValueError("give at least one recording")
        self._recordings = tuple(recordings)
        self._fault = fault
        self._rate = rate
        self._random = random.Random(seed)
        self._turn = 0
        self._cut: dict[str, list[bytes]] = {}
        """Cut streams' events (id-stamped), by stream id, for their resume."""

    def app(self) -> web.Application:
        app = web.Application()
        for path in PATHS:
            app.router.add_post(path, self._serve)
        app.router.add_get(RESUME_PREFIX + "{stream}", self._resume)
        app.router.add_delete(RESUME_PREFIX + "{stream}", self._forget)
        return app

    def _pick(self, request: web.Request) -> Recording | None:
        named = request.headers.get("X-Replay-File")
        if named is not None:
            return next((r for r in self._recordings if r.name == named), None)
        recording = self._recordings[self._turn % len(self._recordings)]
        self._turn += 1
        return recording

    async def _serve(self, request: web.Request) -> web.StreamResponse:
        await request.read()
        fault = request.headers.get("X-Replay-Fault", self._fault or "")
        if fault and fault not in SERVED_FAULTS:
            known = ", ".join(SERVED_FAULTS)
            return web.json_response(
                {"error": f"unknown fault {fault!r}; one of {known}"}, status=400
            )
        recording = self._pick(request)
        if recording is None:
            return web.json_response({"error": "no recording of that name"}, status=404)
        if fault == "cut-and-resume":
            return await self._cut_and_resume(request, recording.data)
        response = web.StreamResponse(headers=_HEADERS)
        await response.prepare(request)
        await self._write(request, response, recording.data, fault or None)
        return response

    async def _cut_and_resume(self, request: web.Request, data: bytes) -> web.StreamResponse:
        """The stream id-stamped, cut after 1 to n-1 events; kept for its resume."""
        self._turn += 1
        stream = f"replay_{self._turn}"
        events = [e for e in data.split(b"\n\n") if e.strip()]
        stamped = [b"id: %s.%d\n%s\n\n" % (stream.encode(), i, e) for i, e in enumerate(events, 1)]
        if len(self._cut) >= KEPT_STREAMS:
            del self._cut[next(iter(self._cut))]
        self._cut[stream] = stamped
        headers = {**dict(_HEADERS), "X-Sluice-Resume-Url": RESUME_PREFIX + stream}
        response = web.StreamResponse(headers=headers)
        await response.prepare(request)
        cut = self._random.randint(1, max(1, len(stamped) - 1))
        await response.write(b"".join(stamped[:cut]))
        await asyncio.sleep(0.05)
        _reset(request)
        return response

    async def _resume(self, request: web.Request) -> web.StreamResponse:
        stamped = self._cut.get(request.match_info["stream"])
        if stamped is None:
            return web.json_response({"error": "no such stream"}, status=404)
        last = request.headers.get("Last-Event-ID", "").rpartition(".")[2]
        after = int(last) if last.isdigit() else 0
        response = web.StreamResponse(headers=_HEADERS)
        await response.prepare(request)
        await response.write(b"".join(stamped[after:]))
        return response

    async def _forget(self, request: web.Request) -> web.Response:
        self._cut.pop(request.match_info["stream"], None)
        return web.json_response({"id": request.match_info["stream"], "status": "cancelled"})

    async def _write(
        self, request: web.Request, response: web.StreamResponse, data: bytes, fault: str | None
    ) -> None:
        if fault is None or fault in FAULTS:
            await response.write(b"".join(inject(data, cast(Fault | None, fault))[0]))
            return
        events = [e + b"\n\n" for e in data.split(b"\n\n") if e.strip()]
        if fault == "split":
            for event in events:
                at = self._random.randint(1, max(1, len(event) - 1))
                for piece in (event[:at], event[at:]):
                    await response.write(piece)
                    await asyncio.sleep(0.005)  # separate TCP writes, not one coalesced
        elif fault == "stall":
            await response.write(events[0])
            await asyncio.sleep(STALL_SECONDS)
        elif fault == "trickle":
            for event in events:
                await response.write(event)
                await asyncio.sleep(1 / self._rate)
        else:  # reset
            await response.write(b"".join(events[: max(1, len(events) // 2)]))
            await asyncio.sleep(0.05)
            _reset(request)


def _reset(request: web.Request) -> None:
    """Abort the connection with a TCP RST (linger 0), as a crashed peer does."""
    transport = request.transport
    if transport is None:
        return
    sock = transport.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()
