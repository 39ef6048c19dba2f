"""``POST /v1/messages``: the Messages wire, decoded and encoded over the exchange.

The stream is SSE with ``event:`` names (:mod:`.encode`); while the gateway waits for
the first upstream event it sends ``ping`` events. Errors are Messages-shaped
(:func:`~sluice.wire.errors.messages_error_json`), before the stream and as its last
event (with the usage so far, and no ``message_stop``).
"""

from __future__ import annotations

from collections.abc import Mapping

from sluice.core.tally import Opening, Tally
from sluice.errors import ApiError
from sluice.frontdoors.chat import SSE_HEADERS
from sluice.frontdoors.messages.decode import decode_messages_request
from sluice.frontdoors.messages.encode import MessagesStreamEncoder, message_body, messages_usage
from sluice.wire.chat import ChatRequest
from sluice.wire.chunks import CompletionChoice
from sluice.wire.encode import StreamIdentity
from sluice.wire.errors import messages_error_event, messages_error_json

PING_EVENT = b'event: ping\ndata: {"type":"ping"}\n\n'


class MessagesDoor:
    name = "messages"
    key_header = "x-api-key"  # what the anthropic SDKs send
    request_id_header = "request-id"  # where they read the request id
    stream_headers = SSE_HEADERS
    keepalive = PING_EVENT

    def decode(
        self, body: bytes | bytearray, headers: Mapping[str, str], max_depth: int
    ) -> ChatRequest:
        return decode_messages_request(body, headers, max_depth)

    def omitted_tools(self, req: ChatRequest) -> tuple[str, ...]:
        return ()

    def stream_encoder(
        self, identity: StreamIdentity, opening: Opening, req: ChatRequest
    ) -> MessagesStreamEncoder:
        return MessagesStreamEncoder(identity, opening)

    def completion(
        self,
        identity: StreamIdentity,
        choices: list[CompletionChoice],
        tally: Tally,
        req: ChatRequest,
    ) -> bytes:
        return message_body(identity, choices[0], tally)

    def error_body(self, err: ApiError) -> bytes:
        return messages_error_json(err)

    def error_event(self, err: ApiError, tally: Tally | None) -> bytes:
        return messages_error_event(err, None if tally is None else messages_usage(tally))
