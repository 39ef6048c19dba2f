"""``POST /v1/responses``: the OpenAI Responses wire, decoded and encoded over the
exchange (docs/responses.md).

The stream is SSE with ``event:`` names (:mod:`.encode`); while the gateway waits for
the first upstream event it sends SSE comments. Errors before the stream are OpenAI's
error body; after it started, ``response.failed`` with the usage so far.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import msgspec

from sluice.core.tally import Opening, Tally
from sluice.errors import ApiError
from sluice.frontdoors.chat import SSE_HEADERS
from sluice.frontdoors.responses.decode import decode_responses_request
from sluice.frontdoors.responses.echo import Echo
from sluice.frontdoors.responses.encode import ResponsesStreamEncoder
from sluice.frontdoors.responses.memory import ResponseMemory
from sluice.frontdoors.responses.objects import WallClock, event, response_object
from sluice.frontdoors.responses.reasoning import ReasoningSeal
from sluice.frontdoors.responses.tools import ToolNames
from sluice.frontdoors.responses.whole import response_body
from sluice.wire.chat import ChatRequest, NativeFields
from sluice.wire.chunks import CompletionChoice
from sluice.wire.encode import StreamIdentity
from sluice.wire.errors import error_json
from sluice.wire.sse import KEEPALIVE_COMMENT

_ENCODER = msgspec.json.Encoder()
_TOOL_TYPE = re.compile(r"[A-Za-z0-9_.-]{1,64}")
"""A tool type as it may stand in a header (others are named ``other``)."""


class ResponsesDoor:
    """The door, its memory of stored responses (:mod:`.memory`) and its sealing of
    reasoning (:mod:`.reasoning`)."""

    name = "responses"
    key_header = None
    request_id_header = None
    stream_headers = SSE_HEADERS
    keepalive = KEEPALIVE_COMMENT

    def __init__(self, memory: ResponseMemory, reasoning: ReasoningSeal, clock: WallClock) -> None:
        self.memory = memory
        self.reasoning = reasoning
        self.clock = clock

    def decode(
        self, body: bytes | bytearray, headers: Mapping[str, str], max_depth: int
    ) -> ChatRequest:
        return decode_responses_request(body, max_depth)

    def omitted_tools(self, req: ChatRequest) -> list[str]:
        """The hosted tools left out of the upstream request (``other`` for a type that
        is not a safe header token)."""
        native = req.native
        tools = native.fields.get("tools") if isinstance(native, NativeFields) else None
        omitted = ToolNames(tools).omitted if tools is not None else []
        names = [name if _TOOL_TYPE.fullmatch(name) else "other" for name in omitted[:16]]
        return list(dict.fromkeys(names))

    def stream_encoder(
        self, identity: StreamIdentity, opening: Opening, req: ChatRequest
    ) -> ResponsesStreamEncoder:
        seal = self.reasoning.sealer(req)
        return ResponsesStreamEncoder(identity, Echo(req), seal, self.clock)

    def completion(
        self,
        identity: StreamIdentity,
        choices: list[CompletionChoice],
        tally: Tally,
        req: ChatRequest,
    ) -> bytes:
        seal = self.reasoning.sealer(req)
        return response_body(identity, Echo(req), choices[0], tally, seal=seal, clock=self.clock)

    def queued(self, req: ChatRequest, request_id: str, created: int) -> bytes:
        """A background response as its creation answers it: ``queued``, not served yet
        (its ``provider``, ``connection`` and ``route`` empty until one serves it)."""
        identity = StreamIdentity(request_id, created, req.model, "", "", "", None)
        return _ENCODER.encode(response_object(identity, Echo(req), "queued", []))

    def error_body(self, err: ApiError) -> bytes:
        return error_json(err)

    def error_event(self, err: ApiError, tally: Tally | None) -> bytes:
        """A failure before any response event (after keep-alives): the ``error`` event."""
        detail = {"code": err.code or err.type, "message": err.message, "param": err.param}
        return event("error", {**detail, "sequence_number": 0})

    async def recall(self, req: ChatRequest, account_id: str) -> ChatRequest:
        return await self.memory.recall(req, account_id, self.reasoning.opener(account_id))

    def remember(
        self, req: ChatRequest, account_id: str, request_id: str, answer: object
    ) -> str | None:
        """Keeps the answer in :attr:`memory` (``answer``: this door's encoder at its
        end, or the whole body)."""
        if isinstance(answer, ResponsesStreamEncoder):
            answer = answer.answer
        if not isinstance(answer, bytes):
            return None
        return self.memory.remember(req, account_id, request_id, answer)
