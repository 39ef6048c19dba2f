"""``POST /v1/chat/completions``: the OpenAI chat wire, decoded and encoded
(docs/api.md#chat-completions).

The request body is our internal request already, so decoding is the typed decode plus
the refusal of per-request overrides. A body with top-level fields the typed model does
not know (vLLM's ``min_p``, sent through the SDKs' ``extra_body``) is decoded again
without them, and they are kept as sent in ``native`` for the connections that allow
them; a body without any (nearly all) is decoded once, at no extra cost.

The stream is SSE: one ``data:`` event per chunk, each carrying the stream's identity;
then the usage chunk when the client asked for it, then ``[DONE]``. A stream that
fails after it started ends with the error event and no ``[DONE]``.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec
from msgspec import UNSET

from sluice.core.batch import ChunkBatch
from sluice.core.tally import Opening, Tally
from sluice.errors import ApiError, InvalidRequestError
from sluice.wire.bounds import DEFAULT_MAX_JSON_DEPTH
from sluice.wire.chat import CHAT_WIRE, ChatRequest, NativeFields, refuse_overrides
from sluice.wire.chunks import ChatCompletion, CompletionChoice
from sluice.wire.encode import ChunkEncoder, StreamIdentity
from sluice.wire.errors import decode_body, error_event, error_json, invalid_body_error
from sluice.wire.sse import DONE_EVENT, KEEPALIVE_COMMENT

_REQUEST = msgspec.json.Decoder(ChatRequest)
_FIELDS = msgspec.json.Decoder(dict[str, msgspec.Raw])
_KNOWN = frozenset(ChatRequest.__struct_fields__)
_ENCODER = msgspec.json.Encoder()
SSE_HEADERS = (
    ("content-type", "text/event-stream"),
    ("cache-control", "no-cache"),
    ("x-accel-buffering", "no"),
)


def decode_chat_request(
    body: bytes | bytearray, max_depth: int = DEFAULT_MAX_JSON_DEPTH
) -> ChatRequest:
    try:
        req = decode_body(_REQUEST, body, max_depth)
    except InvalidRequestError as err:
        if err.code != "unknown_parameter":
            raise
        req = _with_extra_fields(body)
    else:
        if req.native is not UNSET:  # a door's own; never a client's to set
            req.native = UNSET
    refuse_overrides(req)
    return req


def _with_extra_fields(body: bytes | bytearray) -> ChatRequest:
    """The request without the top-level fields it does not model, those kept as sent
    in ``native``."""
    try:
        fields = _FIELDS.decode(body)
        known = {k: v for k, v in fields.items() if k in _KNOWN and k != "native"}
        req = _REQUEST.decode(_ENCODER.encode(known))
    except msgspec.DecodeError as exc:
        raise invalid_body_error(exc) from None
    extra = {k: v for k, v in fields.items() if k not in _KNOWN}
    for name, value in extra.items():
        _check_text(name, value)
    if extra:
        req.native = NativeFields(CHAT_WIRE, extra)
    return req


def _check_text(name: str, value: msgspec.Raw) -> None:
    """A field kept as sent is sent on byte for byte: it must be UTF-8 (its JSON shape
    was checked when it was read)."""
    try:
        bytes(value).decode()
    except UnicodeDecodeError:
        raise InvalidRequestError(
            f"The request body is not valid JSON: invalid UTF-8 in '{name[:100]}'.",
            code="invalid_json",
            param=name[:256],
        ) from None


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
