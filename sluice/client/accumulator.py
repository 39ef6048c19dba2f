"""One attempt's stream as a pure state machine: bytes in (with the time they arrived),
typed events out, a :class:`StreamResult` at the end.

Bytes go through the gateway's own :class:`SSEDecoder` (one parser, not two). Chunks
are decoded into lenient structs: every field optional, so the client reads any
OpenAI-compatible server, where Sluice's ``provider``/``route``/``cost`` are absent, a
``usage`` may be ``null`` on every chunk, or a tool call may come without ``index``.
Nothing after ``[DONE]`` or an error event is read.
"""

from __future__ import annotations

from typing import Any, cast

import msgspec
from msgspec import Struct

from sluice.client.events import (
    ChoiceResult,
    ContentDelta,
    ErrorInfo,
    ReasoningDelta,
    StreamEvent,
    StreamResult,
    StreamState,
    ToolCall,
    ToolCallFragment,
    Usage,
    UsageReport,
)
from sluice.wire.bounds import EventTooLargeError
from sluice.wire.sse import ServerSentEvent, SSEDecoder


class _Function(Struct):
    name: str | None = None
    arguments: str | None = None


class _ToolCall(Struct):
    index: int | None = None
    id: str | None = None
    function: _Function | None = None


class _Delta(Struct):
    content: str | None = None
    reasoning_content: str | None = None
    reasoning: str | None = None
    tool_calls: list[_ToolCall] | None = None


class _Choice(Struct):
    index: int = 0
    delta: _Delta | None = None
    finish_reason: str | None = None


class _PromptDetails(Struct):
    cached_tokens: int | None = None


class _CompletionDetails(Struct):
    reasoning_tokens: int | None = None


class _Usage(Struct):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None
    prompt_tokens_details: _PromptDetails | None = None
    completion_tokens_details: _CompletionDetails | None = None
    cost: float | None = None
    price_source: str | None = None


class WireError(Struct):
    """The ``error`` object of an error event or an HTTP error body."""

    message: str = ""
    type: str | None = None
    code: str | int | None = None


class _Event(Struct):
    """A chunk or an error event: both decode into this one shape."""

    id: str | None = None
    model: str | None = None
    provider: str | None = None
    connection: str | None = None
    route: str | None = None
    route_name: str | None = None
    choices: list[_Choice] | None = None
    usage: _Usage | None = None
    credits_used: float | None = None
    error: WireError | str | None = None


_DECODER = msgspec.json.Decoder(_Event)
_IDENTITY = ("model", "provider", "connection", "route", "route_name")


def wire_usage(usage: _Usage) -> Usage:
    prompt = usage.prompt_tokens or 0
    completion = usage.completion_tokens or 0
    details_in, details_out = usage.prompt_tokens_details, usage.completion_tokens_details
    return Usage(
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=usage.total_tokens or prompt + completion,
        cached_tokens=(details_in.cached_tokens or 0) if details_in else 0,
        reasoning_tokens=(details_out.reasoning_tokens or 0) if details_out else 0,
        cost=usage.cost,
        price_source=usage.price_source,
    )


def wire_error(error: WireError | str, default_type: str = "server_error") -> ErrorInfo:
    if isinstance(error, str):
        return ErrorInfo(default_type, error)
    code = None if error.code is None else str(error.code)
    return ErrorInfo(error.type or default_type, error.message, code)


class _CallParts:
    __slots__ = ("arguments", "id", "name")

    def __init__(self, call_id: str | None) -> None:
        self.id = call_id
        self.name = ""
        self.arguments: list[str] = []

    def build(self, index: int) -> ToolCall:
        text = "".join(self.arguments)
        try:
            parsed: Any = msgspec.json.decode(text)
        except (msgspec.DecodeError, RecursionError):
            return ToolCall(index, self.id, self.name, text, valid_json=False)
        return ToolCall(index, self.id, self.name, text, valid_json=True, parsed=parsed)


class _ChoiceParts:
    __slots__ = ("calls", "finish_reason", "reasoning", "text")

    def __init__(self) -> None:
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.calls: dict[int, _CallParts] = {}
        self.finish_reason: str | None = None

    def call_index(self, fragment: _ToolCall) -> int:
        """Servers that omit ``index`` start a new call with each new ``id``."""
        if fragment.index is not None:
            return fragment.index
        if not self.calls:
            return 0
        last = max(self.calls)
        known = self.calls[last].id
        return last + 1 if fragment.id is not None and fragment.id != known else last

    def build(self, index: int) -> ChoiceResult:
        calls = tuple(self.calls[i].build(i) for i in sorted(self.calls))
        text, reasoning = "".join(self.text), "".join(self.reasoning)
        return ChoiceResult(index, text, reasoning, calls, self.finish_reason)


class StreamAccumulator:
    """Feed it the response body as it arrives; ``finish`` says how the stream ended.

    ``call_started`` is when the whole call began (for TTFT, retries included); times
    are any monotonic clock's seconds, passed in by the caller.
    """

    def __init__(self, call_started: float, *, attempt: int = 1, model: str | None = None):
        self._decoder = SSEDecoder()
        self._call_started = call_started
        self._attempt = attempt
        self._requested_model = model
        self._choices: dict[int, _ChoiceParts] = {}
        self._identity: dict[str, str] = {}
        self._request_id: str | None = None
        self._usage: Usage | None = None
        self._credits: float | None = None
        self._error: ErrorInfo | None = None
        self._done = False
        self.last_event_at: float | None = None
        self._first_content_at: float | None = None
        self._last_content_at = 0.0
        self._content_events = 0
        self._wire_error = False
        self.last_event_id: str | None = None
        """The ``id:`` of the last event read (a resumable stream's)."""
        self.resumes = 0

    @property
    def content_seen(self) -> bool:
        """A content, reasoning or tool-call event arrived: no silent retry any more."""
        return self._first_content_at is not None

    @property
    def finished(self) -> bool:
        """``[DONE]`` or a failure: nothing more to read."""
        return self._done or self._error is not None

    def open(self, request_id: str | None) -> None:
        """The response head arrived; ``X-Request-Id`` wins over the chunks' ``id``."""
        self._request_id = request_id

    @property
    def request_id(self) -> str | None:
        return self._request_id

    @property
    def ended_on_wire(self) -> bool:
        """The stream itself ended (``[DONE]``, or its error event): nothing runs on."""
        return self._done or self._wire_error

    def reconnect(self) -> None:
        """A resumable stream picked up again: a fresh connection's bytes from here
        (what the cut one left half-read is dropped), the answer so far kept."""
        self._decoder = SSEDecoder()
        self.resumes += 1

    def fail(self, error: ErrorInfo) -> None:
        if self._error is None:
            self._error = error

    def feed(self, data: bytes, at: float) -> list[StreamEvent]:
        out: list[StreamEvent] = []
        try:
            events = self._decoder.feed(data)
        except EventTooLargeError as exc:
            for sse in exc.decoded:
                self._event(cast(ServerSentEvent, sse), at, out)
            if not self.finished:
                message = f"an event exceeded {exc.limit} bytes"
                self.fail(ErrorInfo("invalid_response", message, "event_too_large"))
            return out
        for sse in events:
            self._event(sse, at, out)
        return out

    def _missing(self, choices: tuple[Any, ...]) -> str:
        """What an incomplete stream lacked, as ``sluice replay`` and logs report it."""
        finished = bool(choices) and all(c.finish_reason for c in choices)
        if self._done:
            return "[DONE] came before every choice had a finish_reason"
        if finished:
            return "the stream ended after its finish_reason, before [DONE]"
        return "the stream ended before a finish_reason and [DONE]"

    def finish(self, at: float, cause: ErrorInfo | None = None) -> StreamResult:
        """End of the attempt. ``cause`` says why the connection ended, if it did
        early (reset, cancelled); a clean close before the end signals is reported as
        ``incomplete`` with a ``connection_error`` of code ``stream_ended``."""
        try:
            for sse in self._decoder.flush():
                self._event(sse, at, [])
        except EventTooLargeError as exc:
            message = f"an event exceeded {exc.limit} bytes"
            self.fail(ErrorInfo("invalid_response", message, "event_too_large"))
        error = self._error
        choices = tuple(self._choices[i].build(i) for i in sorted(self._choices))
        state: StreamState
        if error is not None:
            state = "error"
        elif self._done and choices and all(c.finish_reason for c in choices):
            state = "truncated" if any(c.finish_reason == "length" for c in choices) else "complete"
        else:
            state = "incomplete"
            error = cause or ErrorInfo("connection_error", self._missing(choices), "stream_ended")
        return StreamResult(
            state=state,
            choices=choices,
            usage=self._usage,
            credits_used=self._credits,
            error=error,
            request_id=self._request_id or self._identity.get("id"),
            requested_model=self._requested_model,
            model=self._identity.get("model"),
            provider=self._identity.get("provider"),
            connection=self._identity.get("connection"),
            route=self._identity.get("route"),
            route_name=self._identity.get("route_name"),
            ttft=self._ttft(),
            tokens_per_second=self._rate(),
            duration=at - self._call_started,
            attempts=self._attempt,
            resumes=self.resumes,
        )

    def _ttft(self) -> float | None:
        first = self._first_content_at
        return None if first is None else first - self._call_started

    def _rate(self) -> float | None:
        first = self._first_content_at
        if first is None or self._last_content_at <= first:
            return None
        usage = self._usage
        tokens = usage.completion_tokens if usage and usage.completion_tokens else None
        return ((tokens or self._content_events) - 1) / (self._last_content_at - first)

    def _event(self, sse: ServerSentEvent, at: float, out: list[StreamEvent]) -> None:
        if self.finished:
            return
        self.last_event_at = at
        if sse.id is not None:
            self.last_event_id = sse.id
        if sse.is_done:
            self._done = True
            return
        try:
            event = _DECODER.decode(sse.data)
        except msgspec.DecodeError as exc:
            self._error = ErrorInfo("invalid_response", f"undecodable event: {exc}", "bad_event")
            return
        except RecursionError:
            self._error = ErrorInfo("invalid_response", "an event nests too deep", "bad_event")
            return
        self._remember(event)
        if event.usage is not None:
            self._usage = wire_usage(event.usage)
            out.append(UsageReport(self._usage))
        if event.credits_used is not None:
            self._credits = event.credits_used
        if event.error is not None:
            self._error = wire_error(event.error)
            self._wire_error = True
            return
        for choice in event.choices or ():
            self._choice(choice, at, out)

    def _remember(self, event: _Event) -> None:
        if event.id and "id" not in self._identity:
            self._identity["id"] = event.id
        for name in _IDENTITY:
            value = getattr(event, name)
            if value is not None:
                self._identity[name] = value

    def _choice(self, choice: _Choice, at: float, out: list[StreamEvent]) -> None:
        parts = self._choices.get(choice.index)
        if parts is None:
            parts = self._choices[choice.index] = _ChoiceParts()
        delta = choice.delta
        if delta is not None:
            reasoning = delta.reasoning_content or delta.reasoning
            if reasoning:
                parts.reasoning.append(reasoning)
                out.append(ReasoningDelta(reasoning, choice.index))
                self._content(at)
            if delta.content:
                parts.text.append(delta.content)
                out.append(ContentDelta(delta.content, choice.index))
                self._content(at)
            for fragment in delta.tool_calls or ():
                out.append(self._tool_call(parts, fragment, choice.index))
                self._content(at)
        if choice.finish_reason:
            parts.finish_reason = choice.finish_reason

    def _tool_call(self, parts: _ChoiceParts, fragment: _ToolCall, choice: int) -> ToolCallFragment:
        index = parts.call_index(fragment)
        call = parts.calls.get(index)
        if call is None:
            call = parts.calls[index] = _CallParts(fragment.id)
        elif fragment.id and call.id is None:
            call.id = fragment.id
        function = fragment.function or _Function()
        if function.name:
            call.name += function.name
        if function.arguments:
            call.arguments.append(function.arguments)
        return ToolCallFragment(index, function.arguments or "", fragment.id, function.name, choice)

    def _content(self, at: float) -> None:
        if self._first_content_at is None:
            self._first_content_at = at
        self._last_content_at = at
        self._content_events += 1
