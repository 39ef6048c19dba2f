"""The one interface every provider implements (STYLE.md: adapters are pure translators).

An adapter turns our request into an
:class:`~sluice.core.upstream_request.UpstreamRequest` and the upstream's bytes into our
chunks. It opens no socket, reads no clock and no environment: the transport sends what
it builds and feeds it what arrives, in whatever pieces arrive.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import msgspec

from sluice.core.batch import ChunkBatch
from sluice.core.connection import Target
from sluice.core.embedding import EmbedCall, Embedded
from sluice.core.upstream_request import UpstreamRequest
from sluice.core.usage import TokenUsage
from sluice.errors import ApiError
from sluice.ids import IdFactory
from sluice.wire.bounds import DEFAULT_MAX_EVENT_BYTES
from sluice.wire.chat import ChatRequest
from sluice.wire.chunks import CompletionChoice

if TYPE_CHECKING:
    from sluice.providers.normalize import EmittedCall


class Repair(msgspec.Struct, frozen=True):
    """Something an upstream sent that normalizing changed, for the request log:
    ``choice_dropped`` (a choice index the request did not ask for) or
    ``tool_call_renumbered`` (``upstream_index`` became ``index``)."""

    kind: str
    choice: int
    upstream_index: int | None = None
    index: int | None = None


class ParsedCompletion(msgspec.Struct):
    """A non-streaming answer, provider-neutral. ``repairs``: what normalizing it changed
    (:class:`~sluice.providers.normalize.Repair`), for the request log."""

    choices: list[CompletionChoice]
    usage: TokenUsage | None
    repairs: list[Repair] = msgspec.field(default_factory=list)


class StreamShape(msgspec.Struct, frozen=True):
    """What one translator accepts from its upstream: the choices the request asked for
    (any other index is dropped) and the largest event its decoder may buffer."""

    choices: int = 1
    max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES


DEFAULT_SHAPE = StreamShape()


class Emitted(Protocol):
    """What a stream emitted so far, as the request log reads it."""

    @property
    def finish_reason(self) -> str | None: ...

    @property
    def repairs(self) -> list[Repair]: ...

    def tool_calls(self) -> list[EmittedCall]: ...


class StreamTranslator(Protocol):
    """Per-request state machine from upstream bytes to our chunks.

    ``feed`` accepts any split of the upstream bytes and returns the same chunks in
    total. When the upstream reports an error inside the stream, ``feed`` returns the
    chunks produced before it and sets ``failure``; nothing more is produced.
    ``finish`` is called at end of input: it returns any last chunks, or raises
    :class:`~sluice.errors.UpstreamError` if the stream was cut short.
    """

    usage: TokenUsage | None
    failure: ApiError | None

    @property
    def output_chars(self) -> int:
        """Characters of content, reasoning and tool arguments produced so far."""
        ...

    @property
    def emitter(self) -> Emitted:
        """What was emitted so far: finish reason, assembled tool calls."""
        ...

    def feed(self, data: bytes) -> ChunkBatch: ...

    def finish(self) -> ChunkBatch: ...


class AdapterBase:
    """What every adapter is built with: its kind, the id factory, the event bound."""

    def __init__(
        self, kind: str, new_id: IdFactory, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES
    ) -> None:
        self.kind = kind
        self._new_id = new_id
        self._max_event_bytes = max_event_bytes

    def _shape(self, req: ChatRequest) -> StreamShape:
        return StreamShape(req.choice_count, self._max_event_bytes)


class Adapter(Protocol):
    kind: str

    def build_request(self, req: ChatRequest, target: Target) -> UpstreamRequest: ...

    def parse_response(
        self, status: int, headers: Mapping[str, str], body: bytes
    ) -> ParsedCompletion: ...

    def parse_error(self, status: int, headers: Mapping[str, str], body: bytes) -> ApiError: ...

    def stream(self, req: ChatRequest) -> StreamTranslator: ...


@runtime_checkable
class CountsTokens(Protocol):
    """An ability: the provider counts a prompt's input tokens itself. An adapter whose
    provider has no count endpoint does not implement it (the gateway estimates);
    :class:`~sluice.providers.registry.AdapterRegistry` resolves it once per adapter."""

    def count_request(self, req: ChatRequest, target: Target) -> UpstreamRequest:
        """The request that asks the provider to count the prompt, as it would be sent."""
        ...

    def parse_count(self, body: bytes) -> int:
        """The count in the answer to :meth:`count_request`."""
        ...


class EmbedBatch(msgspec.Struct):
    """One upstream call of an embeddings request: the inputs ``start`` to
    ``start + count`` (the adapter's split; the caller joins the answers in order)."""

    request: UpstreamRequest
    start: int
    count: int


@runtime_checkable
class EmbedsText(Protocol):
    """An ability: the provider embeds text. ``embed_concurrency``: how many of one
    request's batches may be in flight at once."""

    embed_concurrency: int

    def embed_batches(self, call: EmbedCall, target: Target) -> list[EmbedBatch]:
        """Requests covering every input of ``call`` in order, each within the
        provider's batch limit; :class:`~sluice.errors.InvalidRequestError` for inputs
        the provider cannot take (token arrays, a ``dimensions`` it cannot give)."""
        ...

    def parse_embeddings(
        self, headers: Mapping[str, str], body: bytes, batch: EmbedBatch
    ) -> Embedded:
        """One batch's successful answer: exactly ``batch.count`` vectors, or
        :class:`~sluice.errors.UpstreamError` (``upstream_malformed``)."""
        ...
