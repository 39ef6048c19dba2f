"""The response cache in an exchange (docs/cache.md).

At admission, a streamed request for a model with a ``cache`` table is looked up by
its key (:func:`~sluice.cache.key.cache_key`): a hit is served by an
:class:`~sluice.routing.upstream.UpstreamStream` that replays the stored answer
(:func:`replayed`), so the door's encoder, the output guardrails, a resumable relay and
the keep-alives work as for any stream; the rate is the cache's share of the price. A
miss records what its stream sends (:class:`Fill`, a tap on the encoder's input, only
for such requests) and keeps it at settlement when the answer was complete and nothing
changed it. ``Cache-Control: no-cache`` skips the lookup, ``no-store`` both.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Literal

import msgspec

from sluice.cache.key import cache_key
from sluice.cache.semantic import Probe
from sluice.cache.store import AnswerStore, CachedAnswer
from sluice.config import CacheConfig
from sluice.core.batch import ChunkBatch
from sluice.core.usage import TokenUsage
from sluice.errors import ApiError
from sluice.metering.charges import Rate, cache_rate
from sluice.providers.base import Repair
from sluice.providers.normalize import EmittedCall
from sluice.routing.plan import Attempt, Plan
from sluice.routing.upstream import UpstreamStream
from sluice.wire.chat import ChatRequest
from sluice.wire.chunks import FunctionDelta

if TYPE_CHECKING:
    from sluice.exchange.state import ExchangeState

CACHE_HEADER = "X-Sluice-Cache"
Outcome = Literal["hit", "miss", "bypass"]
_UNCACHED = frozenset({"blocked", "redacted", "unavailable", "failed_open"})
"""Output guardrail outcomes after which an answer is not what the model said, or was
not checked."""
_CUT = frozenset({"length", "content_filter"})
"""A choice that ended so is not a whole answer."""


class CacheNote(msgspec.Struct):
    """What the cache did for one request: its outcome, and for a hit the answer and
    the attempt it is served as."""

    outcome: Outcome
    config: CacheConfig
    key: str | None = None
    answer: CachedAnswer | None = None
    served_as: Attempt | None = None
    probe: Probe | None = None
    """The semantic cache's look at it (docs/cache.md#semantic-cache), when it had one."""


def looked_up(
    req: ChatRequest,
    plan: Plan,
    account_id: str,
    incoming: Mapping[str, str],
    store: AnswerStore,
) -> CacheNote | None:
    """The cache's part in ``req``: None when its model is not cached; ``bypass`` for
    a whole answer or ``no-store``; else a hit (served as the attempt the answer came
    from, when the plan still has it) or a miss."""
    config = plan.cache
    if config is None:
        return None
    control = incoming.get("cache-control", "").lower()
    if not req.is_stream or "no-store" in control:
        return CacheNote("bypass", config)
    scope = account_id if config.scope == "account" else "global"
    key = cache_key(req, plan, scope)
    answer = None if "no-cache" in control else store.get(key)
    attempt = None if answer is None else attempt_of(plan, answer)
    if answer is None or attempt is None:
        return CacheNote("miss", config, key)
    return CacheNote("hit", config, key, answer, attempt)


def attempt_of(plan: Plan, answer: CachedAnswer) -> Attempt | None:
    """The plan's attempt the answer came from, as that connection is configured now (a
    reload that changed its upstream, its provider or the model's name there does not
    serve the old answers)."""
    for attempt in plan.attempts:
        if _served_as(attempt) == answer.served_as:
            return attempt
    return None


def _served_as(attempt: Attempt) -> list[str]:
    target = attempt.target
    conn = target.connection
    return [conn.id, conn.provider, conn.base_url, target.model_id, target.native_model]


def hit_rate(note: CacheNote | None, rate: Rate) -> Rate:
    """``rate``, or for a hit the cache's share of it."""
    if note is None or note.outcome != "hit":
        return rate
    return cache_rate(rate, note.config.price_share)


class Fill:
    """A miss's stream as the door's encoder receives it, batch by batch, while it
    stays within ``most`` characters and whole (no choice cut); past either it is
    dropped (``spoiled``) and the answer is not kept."""

    __slots__ = ("_chars", "_clock", "_most", "_started", "batches", "offsets", "spoiled")

    def __init__(self, clock: Callable[[], float], most: int) -> None:
        self._clock = clock
        self._most = most
        self._chars = 0
        self._started: float | None = None
        self.batches: list[ChunkBatch] = []
        self.offsets: list[float] = []
        self.spoiled = False

    def tap(self, events: Callable[[ChunkBatch], bytes]) -> Callable[[ChunkBatch], bytes]:
        def tapped(batch: ChunkBatch) -> bytes:
            if not self.spoiled:
                self._record(batch)
            return events(batch)

        return tapped

    def _record(self, batch: ChunkBatch) -> None:
        now = self._clock()
        if self._started is None:
            self._started = now
        self._chars += chars_in(batch)
        if self._chars > self._most or any(c.finish_reason in _CUT for cs in batch for c in cs):
            self.spoiled = True
            self.batches, self.offsets = [], []
            return
        self.batches.append(batch)
        self.offsets.append(now - self._started)


def chars_in(batch: ChunkBatch) -> int:
    """Characters of content, reasoning and tool arguments in ``batch``."""
    count = 0
    for choices in batch:
        for choice in choices:
            delta = choice.delta
            count += len(delta.content or "") + len(delta.reasoning_content or "")
            for call in delta.tool_calls or ():
                function = call.function
                if isinstance(function, FunctionDelta):
                    count += len(function.arguments or "")
    return count


def keep(state: ExchangeState, store: AnswerStore) -> bool:
    """At settlement: a miss's answer stored when it is complete (read to its end, no
    error, no choice cut at ``length``, reported usage) and no guardrail changed or
    skipped it."""
    note, fill, translator, attempt = state.cache, state.fill, state.translator, state.attempt
    if note is None or note.key is None or fill is None or fill.spoiled or translator is None:
        return False
    usage = translator.usage
    complete = state.completed and state.error is None and state.disconnect is None
    if not complete or attempt is None or usage is None or usage.estimated:
        return False
    if not _covered(state, attempt) or any(
        n.stage == "output" and n.outcome in _UNCACHED for n in state.guardrails
    ):
        return False
    answer = CachedAnswer(
        filled_by=state.request_id,
        account_id=state.principal.account_id,
        served_as=_served_as(attempt),
        tokens=usage,
        finish_reason=state.finish_reason(),
        tool_calls=translator.emitter.tool_calls(),
        batches=fill.batches,
        offsets=fill.offsets,
    )
    return store.put(note.key, answer, note.config.ttl)


def _covered(state: ExchangeState, attempt: Attempt) -> bool:
    """Did the cache that applies serve it: not a model's configured fallback, and for
    a model asked by name, that model (a route's cache covers its targets)?"""
    plan = state.plan
    if plan is None or attempt.fallback:
        return False
    return plan.route_name is not None or attempt.model.id == plan.attempts[0].model.id


def replayed(note: CacheNote, clock: Callable[[], float]) -> UpstreamStream:
    """A hit's stream: its stored batches, at once or at their first pace."""
    assert note.answer is not None and note.served_as is not None
    answer = note.answer
    paced = note.config.replay == "paced"
    return UpstreamStream(
        note.served_as, _Replaying(answer, paced, clock), _Replay(answer), _unchanged
    )


def _unchanged(err: ApiError) -> ApiError:
    return err


class _Replaying:
    """The transport's side of a replay: one read per stored batch, then the end."""

    status = 200
    headers: Mapping[str, str] = {}

    def __init__(self, answer: CachedAnswer, paced: bool, clock: Callable[[], float]) -> None:
        self._offsets = answer.offsets
        self._paced = paced
        self._clock = clock
        self._started: float | None = None
        self._next = 0

    async def read_chunk(self) -> bytes:
        if self._next >= len(self._offsets):
            return b""
        now = self._clock()
        if self._started is None:
            self._started = now
        elif self._paced:
            wait = self._started + self._offsets[self._next] - now
            await asyncio.sleep(max(wait, 0))
        else:
            await asyncio.sleep(0)  # the other streams' turn between batches
        self._next += 1
        return b"."

    async def read_body(self, limit: int) -> bytes:
        return b""

    def close(self) -> None:
        self._next = len(self._offsets)

    def watch(self, stall: float) -> None:
        """A replay never stalls."""

    def release(self) -> None:
        """Nothing to give back."""


class _Replay:
    """The translator's side: each read is the next stored batch; the stored usage at
    the end (a client that leaves before is charged for what it was sent)."""

    failure: ApiError | None = None

    def __init__(self, answer: CachedAnswer) -> None:
        self.usage: TokenUsage | None = None
        self._answer = answer
        self._next = 0
        self._chars = 0

    @property
    def output_chars(self) -> int:
        return self._chars

    @property
    def emitter(self) -> _Replay:
        return self

    @property
    def finish_reason(self) -> str | None:
        return self._answer.finish_reason

    @property
    def repairs(self) -> list[Repair]:
        return []

    def tool_calls(self) -> list[EmittedCall]:
        return self._answer.tool_calls

    def feed(self, data: bytes) -> ChunkBatch:
        batch = self._answer.batches[self._next]
        self._next += 1
        self._chars += chars_in(batch)
        return batch

    def finish(self) -> ChunkBatch:
        self.usage = self._answer.tokens
        return []
