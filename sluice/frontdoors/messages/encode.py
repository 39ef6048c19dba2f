"""Our chunks → the Messages stream's events, and a whole answer → a Message.

The stream opens with ``message_start`` (the message with empty ``content`` and the
usage known when the first upstream event arrived: the prompt estimated where the
upstream counts it only at the end, no output yet), then one content block at a time:
``content_block_start``, its deltas (``text_delta``, ``thinking_delta``,
``signature_delta``, ``input_json_delta``), ``content_block_stop``. A block of another
kind, a new tool call or a signature followed by more reasoning closes the open block
and starts the next index. Redacted thinking is a block that starts and stops at once.
The end is ``message_delta`` (stop reason, the stop sequence where the provider named
it, the whole usage: its counts replace ``message_start``'s in the SDKs) and
``message_stop``. Anthropic sends one block at a time; an
upstream that interleaves its tool calls' arguments (OpenAI may) has every call after
the first held back and sent whole, in order, when the first one's block ends.

Per chunk the events are assembled from fixed byte prefixes around the JSON-encoded
text: no structs are built on the hot path.
"""

from __future__ import annotations

import msgspec

from sluice.core.batch import ChunkBatch
from sluice.core.tally import Opening, Tally
from sluice.errors import ApiError
from sluice.wire.chunks import CompletionChoice, Delta, ToolCallDelta, text_only
from sluice.wire.conversation import ThinkingBlock
from sluice.wire.encode import StreamIdentity
from sluice.wire.errors import messages_error_event
from sluice.wire.messages import (
    Message,
    MessageDelta,
    MessageDeltaBody,
    MessageStart,
    OutBlock,
    OutRedactedThinking,
    OutText,
    OutThinking,
    OutToolUse,
    Usage,
)

_ENCODER = msgspec.json.Encoder()
_JSON = msgspec.json.Decoder()
_STOP_REASONS = (
    ("length", "max_tokens"),
    ("tool_calls", "tool_use"),
    ("content_filter", "refusal"),
)
_DELTA = b'event: content_block_delta\ndata: {"type":"content_block_delta","index":'
_START = b'event: content_block_start\ndata: {"type":"content_block_start","index":'
_STOP = b'event: content_block_stop\ndata: {"type":"content_block_stop","index":'
_TEXT = b',"delta":{"type":"text_delta","text":'
_THINKING = b',"delta":{"type":"thinking_delta","thinking":'
_SIGNATURE = b',"delta":{"type":"signature_delta","signature":'
_JSON_DELTA = b',"delta":{"type":"input_json_delta","partial_json":'
_TEXT_BLOCK = b',"content_block":{"type":"text","text":""}}\n\n'
_THINKING_BLOCK = b',"content_block":{"type":"thinking","thinking":"","signature":""}}\n\n'
_END = b"}}\n\n"
_MESSAGE_STOP = b'event: message_stop\ndata: {"type":"message_stop"}\n\n'


def stop_reason(finish_reason: str | None, stop_sequence: str | None) -> str | None:
    """Our finish reason as a Messages stop reason."""
    if finish_reason is None:
        return None
    if finish_reason == "stop":
        return "end_turn" if stop_sequence is None else "stop_sequence"
    return next((ours for theirs, ours in _STOP_REASONS if theirs == finish_reason), "end_turn")


def messages_usage(tally: Tally | None) -> Usage:
    """The Messages counts: ``input_tokens`` excludes cache reads and writes."""
    if tally is None:
        return Usage(
            input_tokens=0,
            cache_creation_input_tokens=0,
            cache_read_input_tokens=0,
            output_tokens=0,
        )
    usage = tally.usage
    read = usage.prompt_tokens_details.cached_tokens
    written = min(tally.cache_write_tokens, usage.prompt_tokens - read)
    out = Usage(
        input_tokens=max(usage.prompt_tokens - read - written, 0),
        cache_creation_input_tokens=written,
        cache_read_input_tokens=read,
        output_tokens=usage.completion_tokens,
        cost=usage.cost,
        price_source=usage.price_source,
    )
    if tally.credits_used is not None:
        out.credits_used = tally.credits_used
    return out


def head(identity: StreamIdentity, content: list[OutBlock], usage: Usage) -> Message:
    return Message(
        id=identity.id,
        model=identity.model,
        content=content,
        stop_reason=None,
        stop_sequence=None,
        usage=usage,
        provider=identity.provider,
        connection=identity.connection,
        route=identity.route,
        route_name=identity.route_name,
    )


def _event(name: bytes, payload: bytes) -> bytes:
    return b"event: " + name + b"\ndata: " + payload + b"\n\n"


class _HeldCall:
    """A tool call not yet given its block: its header and the arguments so far."""

    __slots__ = ("arguments", "id", "index", "name")

    def __init__(self, index: int, call_id: str, name: str) -> None:
        self.index, self.id, self.name = index, call_id, name
        self.arguments: list[str] = []


class MessagesStreamEncoder:
    """One stream's events; ``opening`` gives the usage known at its first event."""

    __slots__ = (
        "_finish",
        "_held",
        "_identity",
        "_index",
        "_kind",
        "_opening",
        "_started",
        "_stop_sequence",
        "_text_prefix",
        "_tools",
        "_waiting",
    )

    def __init__(self, identity: StreamIdentity, opening: Opening) -> None:
        self._identity = identity
        self._opening = opening
        self._started = False
        self._index = -1  # the open (or last) block's index
        self._kind: str | None = None  # the open block: text, thinking, signed, tool
        self._tools: dict[int, int] = {}  # our tool-call index -> its block index
        self._waiting: _HeldCall | None = None  # started while another call's block is open
        self._held: list[_HeldCall] = []  # calls of an interleaving upstream, sent whole later
        self._finish: str | None = None
        self._stop_sequence: str | None = None
        self._text_prefix = b""  # a text_delta event's bytes up to its text, for the open block

    def events(self, batch: ChunkBatch) -> bytes:
        out: list[bytes] = []
        if not self._started:
            out.append(self._message_start())
        for choices in batch:
            for choice in choices:
                if choice.index == 0:
                    delta = choice.delta
                    if self._kind == "text" and text_only(delta):  # most chunks
                        out.append(self._text_prefix + _ENCODER.encode(delta.content) + _END)
                    else:
                        self._delta(delta, out)
                    if choice.finish_reason is not None:
                        self._finish = choice.finish_reason
                        matched = choice.stop_sequence
                        self._stop_sequence = matched if isinstance(matched, str) else None
        return b"".join(out)

    def ending(self, tally: Tally | None) -> bytes:
        out = [] if self._started else [self._message_start()]
        self._close(out)
        reason = stop_reason(self._finish, self._stop_sequence) or "end_turn"
        body = MessageDeltaBody(reason, self._stop_sequence)
        out.append(
            _event(b"message_delta", _ENCODER.encode(MessageDelta(body, messages_usage(tally))))
        )
        out.append(_MESSAGE_STOP)
        return b"".join(out)

    def failure(self, err: ApiError, tally: Tally | None) -> bytes:
        return messages_error_event(err, None if tally is None else messages_usage(tally))

    def _message_start(self) -> bytes:
        self._started = True
        counts = messages_usage(self._opening())
        counts.cost = counts.price_source = msgspec.UNSET  # priced at the end
        counts.output_tokens = 0  # none is shown yet: message_delta says how many
        message = head(self._identity, [], counts)
        return _event(b"message_start", _ENCODER.encode(MessageStart(message)))

    def _delta(self, delta: Delta, out: list[bytes]) -> None:
        for text in (delta.content, delta.refusal):
            if isinstance(text, str) and text:
                self._open("text", _TEXT_BLOCK, out)
                out.append(self._delta_event(_TEXT, text))
        reasoning = delta.reasoning_content
        if isinstance(reasoning, str) and reasoning:
            self._open("thinking", _THINKING_BLOCK, out)
            out.append(self._delta_event(_THINKING, reasoning))
        signature = delta.reasoning_signature
        if isinstance(signature, str):
            self._open("thinking", _THINKING_BLOCK, out)
            out.append(self._delta_event(_SIGNATURE, signature))
            self._kind = "signed"  # more reasoning is a block of its own
        redacted = delta.redacted_reasoning
        if isinstance(redacted, str):
            block = _ENCODER.encode(OutRedactedThinking(redacted))
            self._open("redacted", b',"content_block":' + block + b"}\n\n", out)
            self._close(out)
        calls = delta.tool_calls
        if isinstance(calls, list):
            for call in calls:
                self._tool_call(call, out)

    def _tool_call(self, call: ToolCallDelta, out: list[bytes]) -> None:
        fn = call.function
        arguments = None if isinstance(fn, msgspec.UnsetType) else fn.arguments
        if isinstance(call.id, str):  # a call's first fragment names it
            name = "" if isinstance(fn, msgspec.UnsetType) else fn.name
            self._tool_start(
                _HeldCall(call.index, call.id, name if isinstance(name, str) else ""), out
            )
        if isinstance(arguments, str) and arguments:
            self._tool_arguments(call.index, arguments, out)

    def _tool_start(self, call: _HeldCall, out: list[bytes]) -> None:
        """A new call opens its block, unless a tool block is open: then it waits. If the
        open call's arguments go on before the waiting call's begin, the upstream
        interleaves its calls (OpenAI may), and every later call is held back whole
        until the open block ends; a block's deltas never follow its stop."""
        if self._kind != "tool":
            self._open_tool(call, out)
        elif self._waiting is None and not self._held:
            self._waiting = call
        else:
            self._hold_waiting()
            self._held.append(call)

    def _tool_arguments(self, call_index: int, arguments: str, out: list[bytes]) -> None:
        waiting = self._waiting
        if self._kind == "tool" and self._tools.get(call_index) == self._index:
            self._hold_waiting()  # the open call goes on: the waiting one must wait
            out.append(
                _DELTA + b"%d" % self._index + _JSON_DELTA + _ENCODER.encode(arguments) + _END
            )
        elif waiting is not None and waiting.index == call_index:
            self._waiting = None  # the open call was done: one call after another
            self._close(out)
            self._open_tool(waiting, out)
            self._tool_arguments(call_index, arguments, out)
        elif (held := next((c for c in self._held if c.index == call_index), None)) is not None:
            held.arguments.append(arguments)
        elif (index := self._tools.get(call_index)) is not None:  # a call already closed
            out.append(_DELTA + b"%d" % index + _JSON_DELTA + _ENCODER.encode(arguments) + _END)

    def _hold_waiting(self) -> None:
        if self._waiting is not None:
            self._held.append(self._waiting)
            self._waiting = None

    def _open_tool(self, call: _HeldCall, out: list[bytes]) -> None:
        block = _ENCODER.encode(OutToolUse(call.id, call.name, msgspec.Raw(b"{}")))
        self._open("tool", b',"content_block":' + block + b"}\n\n", out)
        self._tools[call.index] = self._index
        if call.arguments:
            arguments = "".join(call.arguments)
            out.append(
                _DELTA + b"%d" % self._index + _JSON_DELTA + _ENCODER.encode(arguments) + _END
            )

    def _delta_event(self, kind: bytes, text: str) -> bytes:
        return _DELTA + b"%d" % self._index + kind + _ENCODER.encode(text) + _END

    def _open(self, kind: str, block: bytes, out: list[bytes]) -> None:
        """Start a block of ``kind`` unless one is open (a tool call always starts one)."""
        if self._kind == kind and kind != "tool":
            return
        self._close(out)
        self._index += 1
        self._kind = kind
        out.append(_START + b"%d" % self._index + block)
        if kind == "text":
            self._text_prefix = _DELTA + b"%d" % self._index + _TEXT

    def _close(self, out: list[bytes]) -> None:
        """Stop the open block; after a tool block, the calls held back follow whole."""
        if self._kind is None:
            return
        out.append(_STOP + b"%d}\n\n" % self._index)
        was_tool, self._kind = self._kind == "tool", None
        if was_tool:
            self._hold_waiting()
            held, self._held = self._held, []
            for call in held:
                self._open_tool(call, out)
                out.append(_STOP + b"%d}\n\n" % self._index)
                self._kind = None


def message_body(identity: StreamIdentity, choice: CompletionChoice, tally: Tally) -> bytes:
    """A whole answer: its thinking (signed where the provider signed it), its text, its
    tool calls, in that order."""
    message = choice.message
    content: list[OutBlock] = []
    if isinstance(message.thinking_blocks, list):
        for thought in message.thinking_blocks:
            if isinstance(thought, ThinkingBlock):
                content.append(OutThinking(thought.thinking, thought.signature))
            else:
                content.append(OutRedactedThinking(thought.data))
    elif isinstance(message.reasoning_content, str) and message.reasoning_content:
        content.append(OutThinking(message.reasoning_content, ""))
    for text in (message.content, message.refusal):
        if isinstance(text, str) and text:
            content.append(OutText(text))
    if isinstance(message.tool_calls, list):
        for call in message.tool_calls:
            content.append(
                OutToolUse(call.id, call.function.name, _tool_input(call.function.arguments))
            )
    stop_sequence = choice.stop_sequence if isinstance(choice.stop_sequence, str) else None
    body = head(identity, content, messages_usage(tally))
    body.stop_reason = stop_reason(choice.finish_reason, stop_sequence) or "end_turn"
    body.stop_sequence = stop_sequence
    return _ENCODER.encode(body)


def _tool_input(arguments: str) -> msgspec.Raw:
    """A call's arguments as its ``input`` object (``{}`` when they are not one)."""
    try:
        value = _JSON.decode(arguments) if arguments.strip() else {}
    except msgspec.DecodeError:
        value = None
    return (
        msgspec.Raw(arguments.encode())
        if isinstance(value, dict) and arguments.strip()
        else msgspec.Raw(b"{}")
    )
