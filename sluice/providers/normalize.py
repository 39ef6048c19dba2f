"""Shared chunk normalization: every translator emits through a :class:`ChunkEmitter`.

It enforces the stream shape of docs/api.md#the-stream whatever the provider sent: one role chunk
first per choice; a tool call's first fragment carries ``index``, ``id``, ``type``,
``function.name`` and empty ``arguments``, later fragments only ``index`` and a piece
of ``arguments``; exactly one empty-delta finish chunk per choice, with a finish
reason from our four (``tool_calls`` when the choice called tools); nothing after it.
Indices are made canonical: a choice the request did not ask for (``index`` outside
``0 .. n-1``) is dropped, and each choice's tool calls are numbered 0, 1, … in the order
they first appear, whatever indices the upstream used (gaps, negatives, repeats of a
finished call's number are its own). Every such repair is kept in :attr:`ChunkEmitter.
repairs` for the request log.
"""

from __future__ import annotations

import msgspec
from msgspec import UNSET, Raw, UnsetType

from sluice.core.batch import ChunkBatch
from sluice.errors import UpstreamError
from sluice.ids import IdFactory
from sluice.providers.base import Repair
from sluice.wire.chunks import (
    FINISH_REASONS,
    Choice,
    CompletionChoice,
    Delta,
    FunctionDelta,
    ToolCallDelta,
)


def normalize_finish_reason(reason: str, called_tools: bool) -> str:
    """One of our four reasons; a choice that called tools ends with ``tool_calls``."""
    if reason not in FINISH_REASONS:
        reason = "stop"
    if reason == "stop" and called_tools:
        return "tool_calls"
    return reason


class EmittedCall(msgspec.Struct):
    """A tool call as the client assembles it from the fragments we sent."""

    choice: int
    index: int
    id: str
    name: str
    arguments: str


class _PendingCall:
    """A tool call being assembled; its arguments are joined only when read."""

    __slots__ = ("id", "name", "pieces")

    def __init__(self, id: str, name: str) -> None:
        self.id = id
        self.name = name
        self.pieces: list[str] = []


def canonical_choices(
    choices: list[CompletionChoice], count: int
) -> tuple[list[CompletionChoice], list[Repair]]:
    """A whole answer's choices that the request asked for (index ``0 .. count-1``, the
    first of each), and a repair noted for every other one; raises when none is left."""
    kept: list[CompletionChoice] = []
    repairs: list[Repair] = []
    seen: set[int] = set()
    for choice in choices:
        if 0 <= choice.index < count and choice.index not in seen:
            seen.add(choice.index)
            kept.append(choice)
        else:
            repairs.append(Repair("choice_dropped", choice.index))
    if not kept:
        raise UpstreamError(
            "The provider's response has no choice the request asked for.", code="upstream_empty"
        )
    return kept, repairs


class ChunkEmitter:
    """Collects normalized chunks; ``take`` hands them over. ``choices``: how many the
    request asked for (``n``)."""

    __slots__ = (
        "_call_index",
        "_calls",
        "_choices",
        "_finish",
        "_new_id",
        "_next_call",
        "_out",
        "output_chars",
        "repairs",
    )

    def __init__(self, new_id: IdFactory, choices: int = 1) -> None:
        self._new_id = new_id
        self._choices = choices
        self._finish: dict[int, str | None] = {}  # choice -> its finish reason, once sent
        self._calls: dict[tuple[int, int], _PendingCall] = {}  # (choice, our index)
        self._call_index: dict[tuple[int, int], int] = {}  # (choice, upstream's) -> ours
        self._next_call: dict[int, int] = {}  # choice -> its next tool-call index
        self._out: ChunkBatch = []
        self.output_chars = 0
        self.repairs: list[Repair] = []

    # -- emitting ------------------------------------------------------------------

    def delta(
        self,
        index: int,
        delta: Delta,
        finish_reason: str | None = None,
        logprobs: Raw | UnsetType | None = UNSET,
    ) -> None:
        """Emit an OpenAI-shaped delta, repairing whatever does not fit our shape."""
        if index not in self._finish:
            if not self._asked_for(index):
                return
            self._start(index)
        elif self._finish[index] is not None:
            return
        delta.role = UNSET  # the role chunk was sent when the choice started
        emit = logprobs is not UNSET
        content = delta.content
        if isinstance(content, str) and content:
            self.output_chars += len(content)
            emit = True
        else:
            delta.content = UNSET
        reasoning = delta.reasoning_content
        if isinstance(reasoning, str) and reasoning:
            self.output_chars += len(reasoning)
            emit = True
        else:
            delta.reasoning_content = UNSET
        if isinstance(delta.refusal, str):
            emit = True
        else:
            delta.refusal = UNSET
        if delta.reasoning_signature is not UNSET or delta.redacted_reasoning is not UNSET:
            emit = True
        calls = delta.tool_calls
        delta.tool_calls = UNSET
        if emit:
            self._out.append([Choice(index, delta, None, logprobs)])
        if isinstance(calls, list) and calls:
            for fragment in self._tool_fragments(index, calls):
                self._out.append([Choice(index, Delta(tool_calls=[fragment]), None)])
        if finish_reason is not None:
            self.finish(index, finish_reason)

    def start(self, index: int) -> None:
        """Open a choice (its role chunk) before any content, as a message-start event does."""
        if index not in self._finish and self._asked_for(index):
            self._start(index)

    def text(self, index: int, text: str) -> None:
        if text:
            self.delta(index, Delta(content=text))

    def reasoning(self, index: int, text: str) -> None:
        if text:
            self.delta(index, Delta(reasoning_content=text))

    def tool_call(
        self,
        index: int,
        call_index: int,
        *,
        id: str | None = None,
        name: str | None = None,
        arguments: str = "",
    ) -> None:
        """A tool-call fragment in any provider's terms; the first one needs ``name``."""
        fn = FunctionDelta(
            name=UNSET if name is None else name, arguments=arguments if arguments else UNSET
        )
        call = ToolCallDelta(call_index, UNSET if id is None else id, UNSET, fn)
        self.delta(index, Delta(tool_calls=[call]))

    def signature(self, index: int, signature: str) -> None:
        """The signature of the reasoning sent so far (it closes a thinking block)."""
        self.delta(index, Delta(reasoning_signature=signature))

    def redacted(self, index: int, data: str) -> None:
        """Reasoning the provider sent encrypted, to be passed back as it came."""
        self.delta(index, Delta(redacted_reasoning=data))

    def finish(self, index: int, reason: str, stop_sequence: str | None = None) -> None:
        if index not in self._finish:
            if not self._asked_for(index):
                return
            self._start(index)
        elif self._finish[index] is not None:
            return
        called_tools = any(choice == index for choice, _ in self._calls)
        finish_reason = self._finish[index] = normalize_finish_reason(reason, called_tools)
        matched = UNSET if stop_sequence is None else stop_sequence
        self._out.append([Choice(index, Delta(), finish_reason, stop_sequence=matched)])

    # -- reading -------------------------------------------------------------------

    def take(self) -> ChunkBatch:
        out, self._out = self._out, []
        return out

    @property
    def finish_reason(self) -> str | None:
        """The first choice's finish reason, once it finished."""
        if 0 in self._finish:
            return self._finish[0]
        return next(iter(self._finish.values()), None)

    def tool_calls(self) -> list[EmittedCall]:
        return [
            EmittedCall(choice, index, call.id, call.name, "".join(call.pieces))
            for (choice, index), call in self._calls.items()
        ]

    def check_complete(self) -> None:
        """Raise unless every choice that started also finished."""
        if not self._finish:
            raise UpstreamError(
                "The upstream response ended without any output.", code="upstream_empty"
            )
        if None in self._finish.values():
            raise UpstreamError(
                "The response stream ended before it completed.", code="stream_incomplete"
            )

    # -- internals -----------------------------------------------------------------

    def _asked_for(self, index: int) -> bool:
        """Whether a choice the upstream started is one the request asked for; a choice
        it did not is dropped, noted once."""
        if 0 <= index < self._choices:
            return True
        if not any(r.kind == "choice_dropped" and r.choice == index for r in self.repairs):
            self.repairs.append(Repair("choice_dropped", index))
        return False

    def _start(self, index: int) -> None:
        self._finish[index] = None
        self._out.append([Choice(index, Delta(role="assistant", content=""), None)])

    def _tool_fragments(self, choice: int, calls: list[ToolCallDelta]) -> list[ToolCallDelta]:
        out: list[ToolCallDelta] = []
        for call in calls:
            fn = call.function
            args = fn.arguments if isinstance(fn, FunctionDelta) else UNSET
            index = self._call_index.get((choice, call.index))
            if index is None:
                index = self._call_index[choice, call.index] = self._next_call.get(choice, 0)
                self._next_call[choice] = index + 1
                if index != call.index:
                    self.repairs.append(Repair("tool_call_renumbered", choice, call.index, index))
                call_id = call.id if isinstance(call.id, str) and call.id else self._new_id("call")
                name = fn.name if isinstance(fn, FunctionDelta) else UNSET
                text_name = name if isinstance(name, str) else ""
                first = FunctionDelta(name=text_name, arguments="")
                out.append(ToolCallDelta(index, call_id, "function", first))
                self._calls[choice, index] = _PendingCall(call_id, text_name)
            if isinstance(args, str) and args:
                self.output_chars += len(args)
                out.append(ToolCallDelta(index, function=FunctionDelta(arguments=args)))
                self._calls[choice, index].pieces.append(args)
        return out
