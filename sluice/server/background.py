"""Background responses (docs/responses.md#background-responses): ``POST /v1/responses``
with ``background: true`` runs detached from its client, on whichever provider serves
it, with OpenAI's statuses; ``GET /v1/responses/{id}`` polls it, ``?stream=true``
(``&starting_after=N``) streams it from its start (after sequence number N), and
``POST /v1/responses/{id}/cancel`` stops it.

The exchange runs it as a stream whose writer is :class:`~sluice.exchange.unwatched.
Unwatched`: every event goes to the stream's relay, so no client leaving (before the
first event or after) stops it. Its creator is answered once it was admitted: the
``queued`` response, or (``stream: true``) the relay from its first event. A request
refused at admission is answered with its error, and nothing is kept. When it ends its
last state is stored: completed or incomplete by the door's memory as any stored
response, failed or cancelled here. Running ones are per process, like their relays.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import TYPE_CHECKING

import msgspec
from msgspec import Raw

from sluice.errors import InternalError, RateLimitError, ShuttingDownError
from sluice.exchange.exchange import Exchange
from sluice.exchange.heads import JSON
from sluice.exchange.ports import Headers
from sluice.exchange.relay import Relay, Relays, Resumption
from sluice.exchange.unwatched import Unwatched
from sluice.exchange.work import chat_work
from sluice.frontdoors.responses.door import ResponsesDoor
from sluice.server.streams import follow
from sluice.storage.mirror import Mirrored
from sluice.wire.chat import ChatRequest, NativeFields, StreamOptions

if TYPE_CHECKING:
    from sluice.server.call import Call
    from sluice.server.context import GatewayContext

_TRUE = b"true"
_FIELDS = msgspec.json.Decoder(dict[str, Raw])
_ENCODER = msgspec.json.Encoder()
_DATA = b"\ndata: "
_STORE_WAIT = 3.0
"""Seconds a poll or cancel on another process waits for an ended one's stored end."""


class _Event(msgspec.Struct):
    """What a background response's last state is read from, in its events."""

    type: str
    response: Raw = Raw(b"null")
    code: str | None = None
    message: str = ""


_EVENT = msgspec.json.Decoder(_Event)


class Background:
    """One background response running on this process."""

    __slots__ = ("account_id", "final", "queued", "req", "request_id", "resume", "task")

    def __init__(self, req: ChatRequest, resume: Resumption, queued: bytes) -> None:
        self.req = req
        self.resume = resume
        self.request_id = resume.request_id
        self.account_id = resume.account_id
        self.queued = queued
        """The response as created, ``queued``."""
        self.task: asyncio.Task[None] | None = None
        self.final: bytes | None = None
        """The response at its end, when it ended failed or cancelled."""

    def snapshot(self) -> bytes:
        """The response now: ``in_progress`` as its stream opened it once the first
        event came (its output is the stream's: ``GET ?stream=true``), else queued;
        ``in_progress`` too once its events outgrew the buffer and are gone."""
        relay = self.resume.begun
        if relay is None:
            return self.queued
        if relay.events:
            event = _event_in(relay.events[0])
            if event is not None and bytes(event.response) != b"null":
                return bytes(event.response)
        return _with_status(self.queued, "in_progress") if relay.overflowed else self.queued


class Backgrounds:
    """The process's background responses, by response id; the count each account has."""

    __slots__ = ("_by_id", "_door", "_per_account", "relays")

    def __init__(self, door: ResponsesDoor, relays: Relays) -> None:
        self._door = door
        self.relays = relays
        self._by_id: dict[str, Background] = {}
        self._per_account: dict[str, int] = {}

    @staticmethod
    def asked_for(req: ChatRequest) -> bool:
        """Does ``req`` ask to run in the background (``background: true``)?"""
        native = req.native
        if not isinstance(native, NativeFields):
            return False
        asked = native.fields.get("background")
        return asked is not None and bytes(asked) == _TRUE

    def running(self, response_id: str, account_id: str) -> Background | None:
        found = self._by_id.get(response_id)
        return found if found is not None and found.account_id == account_id else None

    async def start(
        self,
        gw: GatewayContext,
        call: Call,
        req: ChatRequest,
        headers: Headers,
        omitted: Sequence[str],
    ) -> None:
        """Run ``req`` detached; answer its creator once it was admitted or refused."""
        principal = call.principal
        assert principal is not None
        running = self._room(principal.account_id, gw.settings.streams.background_per_account)
        streamed = req.is_stream
        req = msgspec.structs.replace(
            req, stream=True, stream_options=StreamOptions(include_usage=True)
        )
        resume = Resumption(self.relays, call.request_id, principal.account_id, gw.settings.streams)
        entry = Background(req, resume, self._door.queued(req, call.request_id, call.created))
        writer = Unwatched(resume, lambda: gw.services.tasks.stopping, entry.queued)
        exchange = Exchange(
            gw.services,
            self._door,
            writer,
            headers,
            call.request.headers,
            counted=True,
            memory=self._door,
        )

        async def run() -> None:
            await exchange.run(
                req,
                principal,
                work=chat_work(req, resume),
                omitted_tools=omitted,
                request_id=call.request_id,
                created=call.created,
                started=call.started,
            )

        entry.task = gw.services.tasks.drain(
            run, started=call.started, request_id=call.request_id, then=lambda: self._ended(entry)
        )
        if entry.task is None:
            raise ShuttingDownError()
        self._by_id[_response_id(call.request_id)] = entry
        self._per_account[principal.account_id] = running + 1
        await _decided(writer, entry.task)
        if writer.refusal is not None:
            await call.writer.send(*writer.refusal)
        elif streamed:
            await follow(self.relays, resume.relay, 0, gw, call)
        else:
            await call.writer.send(200, [*headers, JSON], entry.queued)

    def _room(self, account_id: str, most: int) -> int:
        """The account's background responses running now; 429 at ``most``."""
        running = self._per_account.get(account_id, 0)
        if running >= most:
            raise RateLimitError(
                f"The account has {running} background responses running, its most "
                "([streams] background_per_account); wait for one to end or cancel one.",
                code="too_many_background_responses",
            )
        return running

    async def poll_elsewhere(self, response_id: str, account_id: str) -> bytes | None:
        """A background response another process runs, as it stands (with Redis); None
        when there is none by that id for the account."""
        share = self.relays.share
        mirrored = await self._elsewhere(response_id, account_id)
        if share is None or mirrored is None:
            return None
        if mirrored.ended is not None:  # its end is on its way to storage
            stored = await self._stored_within(response_id, account_id, _STORE_WAIT)
            if stored is not None:
                return stored
        first = await share.first(mirrored.request_id)
        opened = None if first is None else _response_in(first)
        return opened or mirrored.opening

    async def cancel_elsewhere(self, response_id: str, account_id: str) -> bytes | None:
        """Stop a background response another process runs (its owner does); the
        response as it ended, once stored (else as it stood, ``cancelled``). None when
        there is none by that id for the account."""
        share = self.relays.share
        mirrored = await self._elsewhere(response_id, account_id)
        if share is None or mirrored is None:
            return None
        if mirrored.ended is None:
            await share.stop(mirrored.request_id, account_id)
        stored = await self._stored_within(response_id, account_id, _STORE_WAIT)
        if stored is not None:
            return stored
        polled = await self.poll_elsewhere(response_id, account_id)
        return _with_status(polled or mirrored.opening, "cancelled")

    async def _elsewhere(self, response_id: str, account_id: str) -> Mirrored | None:
        share = self.relays.share
        if share is None:
            return None
        mirrored = await share.find(request_id_of(response_id), account_id)
        return mirrored if mirrored is not None and mirrored.opening else None

    async def _stored_within(
        self, response_id: str, account_id: str, seconds: float
    ) -> bytes | None:
        """The stored response, waiting up to ``seconds`` for another process's write."""
        memory = self._door.memory
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                while True:
                    stored = await memory.find(response_id, account_id)
                    if stored is not None:
                        return bytes(stored.response)
                    await asyncio.sleep(0.05)
        return None

    async def cancel(self, entry: Background) -> bytes:
        """Stop it now, charged for what it made; the response as it ended (``cancelled``,
        or, when it ended first, as the door's memory stored it)."""
        relay, task = entry.resume.begun, entry.task
        if relay is not None:
            self.relays.cancel(relay)
        elif task is not None:
            task.cancel()
        if task is not None:
            await asyncio.wait({task})
        if entry.final is not None:
            return entry.final
        response_id = _response_id(entry.request_id)
        stored = await self._stored_within(response_id, entry.account_id, _STORE_WAIT)
        return stored or entry.queued

    def _ended(self, entry: Background) -> None:
        """It ended: no longer running; a failed or cancelled end stored as such (a
        complete one the door's memory stored)."""
        self._by_id.pop(_response_id(entry.request_id), None)
        left = self._per_account.get(entry.account_id, 1) - 1
        if left > 0:
            self._per_account[entry.account_id] = left
        else:
            self._per_account.pop(entry.account_id, None)
        entry.resume.done("cancelled")  # a no-op when its writer saw it end
        relay = entry.resume.begun
        if relay is None or relay.ended == "complete":
            return  # refused (nothing to keep), or kept by the memory
        entry.final = _final(entry, relay)
        self._door.memory.keep(entry.req, entry.account_id, entry.request_id, entry.final)


async def _decided(writer: Unwatched, task: asyncio.Task[None]) -> None:
    """Until the request was admitted or refused (or its run ended without either)."""
    waiting = asyncio.ensure_future(writer.decided.wait())
    try:
        await asyncio.wait({waiting, task}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiting.cancel()
    if writer.refusal is None and not writer.started:  # cancelled or crashed first
        if writer.interrupted:
            raise ShuttingDownError()
        raise InternalError("The background response could not be started.")


def _response_id(request_id: str) -> str:
    return "resp_" + request_id.partition("_")[2]


def request_id_of(response_id: str) -> str:
    """The request a response answered (its id is the request's, ``resp_`` for ``req_``)."""
    return "req_" + response_id.partition("_")[2]


def _event_in(event: bytes) -> _Event | None:
    """What a stream event of the Responses wire says, if it is one."""
    start = event.find(_DATA)
    if start < 0:
        return None
    try:
        return _EVENT.decode(event[start + len(_DATA) :].strip())
    except msgspec.DecodeError:
        return None


def _response_in(event: bytes) -> bytes | None:
    """The response object a ``response.*`` event carries, if it does."""
    found = _event_in(event)
    response = None if found is None else bytes(found.response)
    return None if response is None or response == b"null" else response


def _with_status(response: bytes, status: str, error: bytes | None = None) -> bytes:
    fields = _FIELDS.decode(response)
    fields["status"] = Raw(_ENCODER.encode(status))
    if error is not None:
        fields["error"] = Raw(error)
    return _ENCODER.encode(fields)


def _final(entry: Background, relay: Relay) -> bytes:
    """The response at a failed or cancelled end: the one ``response.failed`` carried,
    else the last known one with that status (and the error an ``error`` event told)."""
    event = _event_in(relay.events[-1]) if relay.events else None
    if event is not None and event.type == "response.failed":
        return bytes(event.response)
    if relay.ended != "failed":
        return _with_status(entry.snapshot(), "cancelled")
    code = event.code if event is not None and event.code else "server_error"
    message = event.message if event is not None else "The response failed."
    error = _ENCODER.encode({"code": code, "message": message})
    return _with_status(entry.snapshot(), "failed", error)
