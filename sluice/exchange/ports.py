"""What an exchange talks to: the client's response stream and the front door.

Both are protocols, so the exchange names neither the HTTP server nor any wire format.
A front door is a decoder and an encoder and nothing else: it turns its wire request
into the internal :class:`~sluice.wire.chat.ChatRequest`, and the exchange's internal
events (chunk batches, the ending with usage, an error) into its wire bytes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from sluice.core.batch import ChunkBatch
from sluice.core.tally import Opening, Tally
from sluice.errors import ApiError
from sluice.wire.chat import ChatRequest
from sluice.wire.chunks import CompletionChoice
from sluice.wire.encode import StreamIdentity

Headers = list[tuple[str, str]]


class ClientGoneError(Exception):
    """The client closed the connection; nothing more can be written."""


class ClientStream(Protocol):
    """One response to the client: whole (``send``) or streamed (``start`` / ``write`` /
    ``end``). ``interrupted``: the gateway is stopping and cut it short."""

    started: bool
    finished: bool
    keep_alive: bool
    writes: int
    """How many writes went out (a keep-alive's measure of silence)."""

    @property
    def interrupted(self) -> bool: ...

    async def send(self, status: int, headers: Headers, body: bytes) -> None: ...

    def send_now(self, status: int, headers: Headers, body: bytes) -> None: ...

    def start(self, status: int, headers: Headers) -> None: ...

    def write_now(self, data: bytes) -> None: ...

    async def write(self, data: bytes) -> None: ...

    def end_now(self, data: bytes) -> None: ...

    async def end(self, data: bytes = b"", close: bool = False) -> None: ...


class StreamEncoder(Protocol):
    """One streamed response's encoder; made once the serving attempt is known."""

    def events(self, batch: ChunkBatch) -> bytes: ...

    def ending(self, tally: Tally | None) -> bytes:
        """After the last content: the usage (when given) and the end marker."""
        ...

    def failure(self, err: ApiError, tally: Tally | None) -> bytes:
        """The last event of a stream that failed after it started (the usage so far
        when given)."""
        ...


class FrontDoor(Protocol):
    """One wire protocol's decoder and encoder over the exchange; ``name`` is how the
    request log and metrics call it."""

    @property
    def name(self) -> str: ...

    @property
    def key_header(self) -> str | None:
        """A header of its wire that may carry the API key instead of ``Authorization:
        Bearer`` (accepted on this door's paths only), or None."""
        ...

    @property
    def request_id_header(self) -> str | None:
        """A header of its wire that carries the request id too (``X-Request-Id`` is on
        every answer already), or None."""
        ...

    @property
    def stream_headers(self) -> Sequence[tuple[str, str]]: ...

    @property
    def keepalive(self) -> bytes:
        """What the stream sends while it waits for the first upstream event."""
        ...

    def decode(
        self, body: bytes | bytearray, headers: Mapping[str, str], max_depth: int
    ) -> ChatRequest: ...

    def omitted_tools(self, req: ChatRequest) -> Sequence[str]:
        """The kinds of tool ``req`` offered that no upstream is sent (a door's hosted
        tools), each a safe header token, at most 16; none: empty. The answer names
        them in ``X-Sluice-Omitted-Tools`` and its request-log row in ``omitted_tools``."""
        ...

    def stream_encoder(
        self, identity: StreamIdentity, opening: Opening, req: ChatRequest
    ) -> StreamEncoder:
        """The encoder of one stream; ``req`` is the request it answers (a door whose
        answer echoes the request reads it)."""
        ...

    def completion(
        self,
        identity: StreamIdentity,
        choices: list[CompletionChoice],
        tally: Tally,
        req: ChatRequest,
    ) -> bytes: ...

    def error_body(self, err: ApiError) -> bytes: ...

    def error_event(self, err: ApiError, tally: Tally | None) -> bytes:
        """The last event of a stream that failed after it started."""
        ...


class Remembering(Protocol):
    """A front door's memory of its answers (the Responses API's stored responses): a
    step before the plan, and one when the answer is complete, before its last bytes
    are written."""

    async def recall(self, req: ChatRequest, account_id: str) -> ChatRequest:
        """``req`` with what it continues (a stored conversation) brought back."""
        ...

    def remember(
        self, req: ChatRequest, account_id: str, request_id: str, answer: StreamEncoder | bytes
    ) -> str | None:
        """Keep the answer (the stream's encoder at its end, or the whole body) if its
        request asked for it, with no I/O on the response path; the id it is kept
        under, or None."""
        ...
