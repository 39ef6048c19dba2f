"""Our chunks → the Responses stream's events (a whole answer is :mod:`.whole`).

The stream opens with ``response.created`` and ``response.in_progress`` (the response
with empty ``output``), then one output item at a time: ``response.output_item.added``,
its parts and deltas, ``response.output_item.done`` with the item whole. Reasoning is a
``reasoning`` item whose summary carries the upstream's thinking text; text is a
``message`` item with one ``output_text`` part (a refusal's text too: Codex drops a
message holding a ``refusal`` part); each tool call is a ``function_call`` item (a
``custom_tool_call`` for a free-form tool). Calls stay open until the answer ends, so
an upstream that interleaves its calls' arguments is followed as it streams. The end
is ``response.completed`` (``response.incomplete`` when the output was cut at
``max_output_tokens`` or filtered) with the whole output and usage. Every event
carries its ``sequence_number``, from 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

import msgspec

from sluice.core.batch import ChunkBatch
from sluice.core.tally import Tally
from sluice.errors import ApiError
from sluice.frontdoors.responses.echo import Echo
from sluice.frontdoors.responses.objects import (
    WallClock,
    call_item,
    completed_at,
    event,
    failed,
    response_id,
    response_object,
    settle,
)
from sluice.frontdoors.responses.reasoning import Seal
from sluice.wire.chunks import Delta, ToolCallDelta, text_only
from sluice.wire.conversation import RedactedThinkingBlock, ThinkingBlock, ThinkingBlocks
from sluice.wire.encode import StreamIdentity
from sluice.wire.responses import (
    OutCustomCall,
    OutFunctionCall,
    OutItem,
    OutMessage,
    OutputText,
    OutReasoning,
    Response,
    SummaryPart,
)

_ENCODER = msgspec.json.Encoder()
_DELTAS = MappingProxyType(
    {
        "message": (b"response.output_text.delta", b'"content_index":0,"logprobs":[],'),
        "reasoning": (b"response.reasoning_summary_text.delta", b'"summary_index":0,'),
        "call": (b"response.function_call_arguments.delta", b""),
    }
)
"""Per item kind: the name of its delta event, and the fields before the delta."""
_SEQ = b',"sequence_number":%d}\n\n'
_EMPTY_PART = b',"part":{"type":"output_text","text":"","annotations":[],"logprobs":[]}'


class _Item:
    """One output item as it streams: its kind, id, index and what it gathered."""

    __slots__ = (
        "arguments",
        "blocks",
        "call_id",
        "custom",
        "id",
        "index",
        "kind",
        "mark",
        "name",
        "prefix",
        "text",
        "where",
    )

    def __init__(self, kind: str, item_id: str, index: int) -> None:
        self.kind, self.id, self.index = kind, item_id, index
        name, where = _DELTAS[kind]
        head = b'{"type":"%s","item_id":"%s","output_index":%d,%s"delta":' % (
            name,
            item_id.encode(),
            index,
            where,
        )
        self.prefix = b"event: " + name + b"\ndata: " + head
        self.where = b'"item_id":"%s","output_index":%d,"content_index":0' % (
            item_id.encode(),
            index,
        )
        self.text: list[str] = []
        self.arguments: list[str] = []
        self.call_id = self.name = ""
        self.custom = False
        self.blocks: ThinkingBlocks = []  # a reasoning item's signed thinking
        self.mark = 0  # where in ``text`` the next thinking block starts


class ResponsesStreamEncoder:
    __slots__ = (
        "_calls",
        "_clock",
        "_echo",
        "_finish",
        "_identity",
        "_open",
        "_output",
        "_response",
        "_seal",
        "_seq",
        "_started",
        "_suffix",
        "answer",
    )

    def __init__(
        self,
        identity: StreamIdentity,
        echo: Echo,
        seal: Seal | None = None,
        clock: WallClock | None = None,
    ) -> None:
        self._identity, self._echo, self._seal, self._clock = identity, echo, seal, clock
        self._response = response_object(identity, echo, "in_progress", [])
        self._suffix = response_id(identity).partition("_")[2]
        self._seq = 0
        self._started = False
        self._open: _Item | None = None  # the open reasoning or message item
        self._calls: dict[int, _Item] = {}  # our tool-call index → its open item
        self._finish: str | None = None
        self._output: list[OutItem] = []
        self.answer: bytes | None = None
        """The response as ``response.completed`` (or ``.incomplete``) carried it, when
        its request asked to store it."""

    def events(self, batch: ChunkBatch) -> bytes:
        out: list[bytes] = []
        if not self._started:
            self._start(out)
        for choices in batch:
            for choice in choices:
                if choice.index != 0:
                    continue
                delta, item = choice.delta, self._open
                if item is not None and item.kind == "message" and text_only(delta):
                    text = delta.content
                    assert isinstance(text, str)  # most chunks: more text
                    item.text.append(text)
                    self._seq += 1
                    out.append(item.prefix + _ENCODER.encode(text) + _SEQ % (self._seq - 1))
                else:
                    self._delta(delta, out)
                if choice.finish_reason is not None:
                    self._finish = choice.finish_reason
        return b"".join(out)

    def ending(self, tally: Tally | None) -> bytes:
        out: list[bytes] = []
        if not self._started:
            self._start(out)
        self._close_all(out)
        response = self._whole()
        settle(response, self._finish, tally, completed_at(self._clock, self._identity))
        kind = "response.completed" if response.status == "completed" else "response.incomplete"
        body = _ENCODER.encode(response)
        self.answer = body if response.store else None
        out.append(self._raw(kind.encode(), b'"response":' + body))
        return b"".join(out)

    def failure(self, err: ApiError, tally: Tally | None) -> bytes:
        out: list[bytes] = []
        if not self._started:
            self._start(out)
        self._close_all(out)
        response = failed(self._whole(), err, tally)
        out.append(self._event("response.failed", {"response": response}))
        return b"".join(out)

    # --- events ---------------------------------------------------------------------

    def _event(self, kind: str, payload: Mapping[str, object]) -> bytes:
        self._seq += 1
        return event(kind, {**payload, "sequence_number": self._seq - 1})

    def _start(self, out: list[bytes]) -> None:
        """``response.created`` and ``response.in_progress``: one response, encoded once."""
        self._started = True
        body = b'"response":' + _ENCODER.encode(self._response)
        out.append(self._raw(b"response.created", body))
        out.append(self._raw(b"response.in_progress", body))

    def _whole(self) -> Response:
        """The response with the output so far (the one the stream opened with)."""
        self._response.output = self._output
        return self._response

    def _delta(self, delta: Delta, out: list[bytes]) -> None:
        reasoning = delta.reasoning_content
        if isinstance(reasoning, str) and reasoning:
            item = self._ensure("reasoning", out)
            item.text.append(reasoning)
            out.append(self._part_event(item, reasoning))
        signature, redacted = delta.reasoning_signature, delta.redacted_reasoning
        if isinstance(signature, str) or isinstance(redacted, str):
            item = self._ensure("reasoning", out)
            if isinstance(signature, str):
                thought = "".join(item.text[item.mark :])
                item.blocks.append(ThinkingBlock(thought, signature))
                item.mark = len(item.text)
            if isinstance(redacted, str):
                item.blocks.append(RedactedThinkingBlock(redacted))
        for text in (delta.content, delta.refusal):
            if isinstance(text, str) and text:
                item = self._ensure("message", out)
                item.text.append(text)
                out.append(self._part_event(item, text))
        calls = delta.tool_calls
        if isinstance(calls, list):
            for call in calls:
                self._call(call, out)

    def _part_event(self, item: _Item, delta: str) -> bytes:
        """A delta of the item: its fixed prefix, the text, the sequence number."""
        self._seq += 1
        return item.prefix + _ENCODER.encode(delta) + _SEQ % (self._seq - 1)

    def _ensure(self, kind: str, out: list[bytes]) -> _Item:
        """The open item of ``kind``, opened (after closing the rest) when it is not."""
        item = self._open
        if item is not None and item.kind == kind:
            return item
        self._close_all(out)
        prefix = "rs" if kind == "reasoning" else "msg"
        item = self._new(kind, prefix)
        self._open = item
        if kind == "reasoning":
            out.append(self._added(item, OutReasoning(id=item.id, summary=[])))
            where = {"item_id": item.id, "output_index": item.index, "summary_index": 0}
            summary = {**where, "part": SummaryPart("")}
            out.append(self._event("response.reasoning_summary_part.added", summary))
        else:  # built from bytes: the common case, kept cheap
            opened = OutMessage(id=item.id, status="in_progress", content=[])
            head = b'"output_index":%d,"item":' % item.index
            out.append(self._raw(b"response.output_item.added", head + _ENCODER.encode(opened)))
            out.append(self._raw(b"response.content_part.added", item.where + _EMPTY_PART))
        return item

    def _raw(self, kind: bytes, fields: bytes) -> bytes:
        """An event from its JSON fields' bytes (between the type and the sequence)."""
        self._seq += 1
        head = b"event: " + kind + b'\ndata: {"type":"' + kind + b'",'
        return head + fields + _SEQ % (self._seq - 1)

    def _close_message(self, item: _Item, out: list[bytes]) -> OutMessage:
        text = "".join(item.text)
        encoded = _ENCODER.encode(text)
        out.append(
            self._raw(
                b"response.output_text.done", item.where + b',"text":' + encoded + b',"logprobs":[]'
            )
        )
        part = b'{"type":"output_text","text":' + encoded + b',"annotations":[],"logprobs":[]}'
        out.append(self._raw(b"response.content_part.done", item.where + b',"part":' + part))
        whole = (
            b'{"type":"message","id":"%s","status":"completed","role":"assistant","content":[%s]}'
        )
        fields = b'"output_index":%d,"item":' % item.index + whole % (item.id.encode(), part)
        out.append(self._raw(b"response.output_item.done", fields))
        return OutMessage(id=item.id, status="completed", content=[OutputText(text)])

    def _new(self, kind: str, prefix: str) -> _Item:
        index = len(self._output)
        item = _Item(kind, f"{prefix}_{self._suffix}_{index}", index)
        self._output.append(OutMessage(id=item.id, status="in_progress", content=[]))
        return item

    def _added(self, item: _Item, whole: OutItem) -> bytes:
        payload = {"output_index": item.index, "item": whole}
        return self._event("response.output_item.added", payload)

    def _call(self, call: ToolCallDelta, out: list[bytes]) -> None:
        fn = call.function
        item = self._calls.get(call.index)
        if item is None and isinstance(call.id, str):
            if self._open is not None:
                self._close(self._open, out)
                self._open = None
            item = self._new("call", "fc")
            item.call_id = call.id
            name = "" if isinstance(fn, msgspec.UnsetType) else fn.name
            item.name = name if isinstance(name, str) else ""
            item.custom = self._echo.names.is_custom(item.name)
            self._calls[call.index] = item
            out.append(self._added(item, self._call_item(item, "in_progress")))
        if item is None or isinstance(fn, msgspec.UnsetType):
            return
        arguments = fn.arguments
        if isinstance(arguments, str) and arguments:
            item.arguments.append(arguments)
            if not item.custom:
                out.append(self._part_event(item, arguments))

    def _call_item(self, item: _Item, status: str) -> OutFunctionCall | OutCustomCall:
        arguments = "".join(item.arguments)
        return call_item(self._echo, item.id, item.call_id, item.name, arguments, status=status)

    def _close_all(self, out: list[bytes]) -> None:
        if self._open is not None:
            self._close(self._open, out)
            self._open = None
        for item in self._calls.values():
            self._close(item, out)
        self._calls.clear()

    def _close(self, item: _Item, out: list[bytes]) -> None:
        where: dict[str, object] = {"item_id": item.id, "output_index": item.index}
        whole: OutItem
        if item.kind == "reasoning":
            text = "".join(item.text)
            where["summary_index"] = 0
            out.append(self._event("response.reasoning_summary_text.done", {**where, "text": text}))
            summary = SummaryPart(text)
            out.append(
                self._event("response.reasoning_summary_part.done", {**where, "part": summary})
            )
            whole = OutReasoning(id=item.id, summary=[summary])
            if item.blocks and self._seal is not None:
                whole.encrypted_content = self._seal(item.blocks)
        elif item.kind == "message":
            self._output[item.index] = self._close_message(item, out)
            return
        else:
            call = self._call_item(item, "completed")
            if isinstance(call, OutFunctionCall):
                done = {**where, "name": call.name, "arguments": call.arguments}
                out.append(self._event("response.function_call_arguments.done", done))
            else:
                done = {**where, "input": call.input}
                out.append(self._event("response.custom_tool_call_input.done", done))
            whole = call
        self._output[item.index] = whole
        out.append(
            self._event("response.output_item.done", {"output_index": item.index, "item": whole})
        )
