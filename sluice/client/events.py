"""What a stream gives its consumer: typed events while it runs, one result at the end.

Pure data. Events are yielded as they arrive; keep-alive comments and the role-only
first chunk produce none. The :class:`StreamResult` says how the stream ended
(``state``) and holds everything reassembled, so a caller never has to re-read events.
"""

from __future__ import annotations

from typing import Any, Literal

from msgspec import Struct

StreamState = Literal["complete", "truncated", "incomplete", "error"]
"""``complete``: a finish_reason and ``[DONE]``. ``truncated``: the same, but a choice
finished with ``length`` (the request's own ``max_tokens``). ``incomplete``: the
connection ended before both (never a success). ``error``: an HTTP error, an error
event, a client-side timeout or an undecodable event."""


class ContentDelta(Struct, frozen=True, gc=False):
    text: str
    choice: int = 0


class ReasoningDelta(Struct, frozen=True, gc=False):
    """``reasoning_content`` (or ``reasoning``, as some servers name it)."""

    text: str
    choice: int = 0


class ToolCallFragment(Struct, frozen=True, gc=False):
    """One piece of a tool call; ``id`` and ``name`` usually come on the first only."""

    index: int
    arguments: str
    id: str | None = None
    name: str | None = None
    choice: int = 0


class Usage(Struct, frozen=True, gc=False):
    """Token counts, plus Sluice's ``cost`` (USD) and ``price_source`` when present."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    cost: float | None = None
    price_source: str | None = None


class UsageReport(Struct, frozen=True, gc=False):
    usage: Usage


StreamEvent = ContentDelta | ReasoningDelta | ToolCallFragment | UsageReport


class ErrorInfo(Struct, frozen=True, gc=False):
    """A failure as the wire (or the client) named it. ``status`` is the HTTP status
    when the error came as a response, ``None`` for error events and client-side ones
    (types ``connection_error``, ``request_timeout``, ``invalid_response``, ``cancelled``)."""

    type: str
    message: str = ""
    code: str | None = None
    status: int | None = None
    retry_after: float | None = None


class ToolCall(Struct, frozen=True):
    """A tool call reassembled by index. ``parsed`` is the decoded arguments when
    ``valid_json``; arguments that do not parse are kept as text, never dropped."""

    index: int
    id: str | None
    name: str
    arguments: str
    valid_json: bool
    parsed: Any = None


class ChoiceResult(Struct, frozen=True):
    index: int
    text: str
    reasoning: str
    tool_calls: tuple[ToolCall, ...]
    finish_reason: str | None


class StreamResult(Struct, frozen=True, kw_only=True):
    """The end of a stream. ``ttft`` runs from the start of the call (retries included:
    what the user waited) to the first content, reasoning or tool-call event;
    ``tokens_per_second`` is the generation rate after that first token: completion
    tokens (the usage count, else one per content event) minus one, over the time
    from the first such event to the last."""

    state: StreamState
    choices: tuple[ChoiceResult, ...]
    usage: Usage | None = None
    credits_used: float | None = None
    error: ErrorInfo | None = None
    request_id: str | None = None
    requested_model: str | None = None
    model: str | None = None
    provider: str | None = None
    connection: str | None = None
    route: str | None = None
    route_name: str | None = None
    ttft: float | None = None
    tokens_per_second: float | None = None
    duration: float = 0.0
    attempts: int = 1
    resumes: int = 0
    """Reconnects of a resumable stream that picked it up after a cut."""

    @property
    def ok(self) -> bool:
        """``complete`` or ``truncated``: a whole answer (possibly cut by max_tokens)."""
        return self.state in ("complete", "truncated")

    @property
    def text(self) -> str:
        return self.choices[0].text if self.choices else ""

    @property
    def reasoning(self) -> str:
        return self.choices[0].reasoning if self.choices else ""

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        return self.choices[0].tool_calls if self.choices else ()

    @property
    def finish_reason(self) -> str | None:
        return self.choices[0].finish_reason if self.choices else None

    @property
    def cost(self) -> float | None:
        return self.usage.cost if self.usage is not None else None


StreamItem = StreamEvent | StreamResult
"""What iterating a stream yields: events, then exactly one :class:`StreamResult`."""
