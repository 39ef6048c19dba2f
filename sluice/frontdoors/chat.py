"""``POST /v1/chat/completions``: the OpenAI chat wire, decoded and encoded
(docs/api.md#chat-completions).

The request body is our internal request already, so decoding is the typed decode plus
the refusal of per-request overrides. The stream is SSE: one ``data:`` event per chunk,
each carrying the stream's identity; then the usage chunk when the client asked for it,
then ``[DONE]``. A stream that fails after it started ends with the error event and no
``[DONE]``.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec
from msgspec import UNSET

from sluice.core.batch import ChunkBatch
from sluice.core.tally import Opening, Tally
from sluice.errors import ApiError
from sluice.wire.bounds import DEFAULT_MAX_JSON_DEPTH
from sluice.wire.chat import ChatRequest, refuse_overrides
from sluice.wire.chunks import ChatCompletion, CompletionChoice
from sluice.wire.encode import ChunkEncoder, StreamIdentity
from sluice.wire.errors import decode_body, error_event, error_json
from sluice.wire.sse import DONE_EVENT, KEEPALIVE_COMMENT

_REQUEST = msgspec.json.Decoder(ChatRequest)
_ENCODER = msgspec.json.Encoder()
SSE_HEADERS = (
    ("content-type", "text/event-stream"),
    ("cache-control", "no-cache"),
    ("x-accel-buffering", "no"),
)


def decode_chat_request(
    body: bytes | bytearray, max_depth: int = DEFAULT_MAX_JSON_DEPTH
) -> ChatRequest:
    req = decode_body(_REQUEST, body, max_depth)
    refuse_overrides(req)
    if req.native is not UNSET:  # a door's own; never a client's to set
        req.native = UNSET
    return req


class ChatStreamEncoder:
    __slots__ = ("_chunks",)

    def __init__(self, identity: StreamIdentity) -> None:
        self._chunks = ChunkEncoder(identity)

    def events(self, batch: ChunkBatch) -> bytes:
        return self._chunks.events(batch)

    def ending(self, tally: Tally | None) -> bytes:
        if tally is None:
            return DONE_EVENT
        return self._chunks.usage_event(tally.usage, tally.credits_used) + DONE_EVENT

    def failure(self, err: ApiError, tally: Tally | None) -> bytes:
        return error_event(err, None if tally is None else tally.usage)


class ChatCompletionsDoor:
    name = "chat"
    key_header = None
    request_id_header = None
    stream_headers = SSE_HEADERS
    keepalive = KEEPALIVE_COMMENT

    def decode(
        self, body: bytes | bytearray, headers: Mapping[str, str], max_depth: int
    ) -> ChatRequest:
        return decode_chat_request(body, max_depth)

    def omitted_tools(self, req: ChatRequest) -> tuple[str, ...]:
        return ()

    def stream_encoder(
        self, identity: StreamIdentity, opening: Opening, req: ChatRequest
    ) -> ChatStreamEncoder:
        return ChatStreamEncoder(identity)

    def completion(
        self,
        identity: StreamIdentity,
        choices: list[CompletionChoice],
        tally: Tally,
        req: ChatRequest,
    ) -> bytes:
        body = ChatCompletion(
            **msgspec.structs.asdict(identity), choices=choices, usage=tally.usage
        )
        if tally.credits_used is not None:
            body.credits_used = tally.credits_used
        return _ENCODER.encode(body)

    def error_body(self, err: ApiError) -> bytes:
        return error_json(err)

    def error_event(self, err: ApiError, tally: Tally | None) -> bytes:
        return error_event(err, None if tally is None else tally.usage)
