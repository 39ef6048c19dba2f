"""The response cache in an exchange (docs/cache.md).

At admission, a request for a model with a ``cache`` table is looked up by its key
(:func:`~sluice.cache.key.cache_key`): a hit is a kept answer, or for a stream an
identical request's upstream stream still running (a
:class:`~sluice.cache.flight.Flight`, which it joins). A stream is served by an
:class:`~sluice.routing.upstream.UpstreamStream` that replays it (:mod:`.replay`), so
the door's encoder, the output guardrails, a resumable relay and the keep-alives work
as for any stream; the rate is the cache's share of the price. A streamed miss leads a
flight: its stream is recorded as the translator gives it, and kept at settlement when
the answer was complete and nothing changed it; a whole answer is kept as it came
(:mod:`sluice.cache.whole`). ``Cache-Control: no-cache`` (or the body's ``cache``, or
the key) skips the lookup, ``no-store`` both.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Literal, NamedTuple

import msgspec

from sluice.cache.flight import CUT, Flight, Flights
from sluice.cache.key import cache_key
from sluice.cache.semantic import Probe
from sluice.cache.store import AnswerStore, CachedAnswer
from sluice.cache.whole import unfolded
from sluice.config import CacheConfig
from sluice.core.principal import Principal
from sluice.metering.charges import Rate, cache_rate
from sluice.providers.normalize import EmittedCall
from sluice.routing.plan import Attempt, Plan
from sluice.wire.chat import CacheHints, ChatRequest

if TYPE_CHECKING:
    from sluice.exchange.state import ExchangeState

CACHE_HEADER = "X-Sluice-Cache"
Outcome = Literal["hit", "miss", "bypass"]
_UNCACHED = frozenset({"blocked", "redacted", "unavailable", "failed_open"})
"""Output guardrail outcomes after which an answer is not what the model said, or was
not checked."""


class CacheNote(msgspec.Struct):
    """What the cache did for one request: its outcome, and for a hit the answer and
    the attempt it is served as, or the flight it joined."""

    outcome: Outcome
    config: CacheConfig
    key: str | None = None
    answer: CachedAnswer | None = None
    served_as: Attempt | None = None
    flight: Flight | None = None
    """The flight a hit joined."""
    reading: bool = False
    """A joiner counted among its flight's readers."""
    leading: Flight | None = None
    """A miss's own flight."""
    reads: bool = True
    """It was looked up (no ``no-cache``, ``no-store`` or key that may not read)."""
    fills: bool = True
    """Its answer may be kept and joined (no ``no-store`` or key that may not fill)."""
    probe: Probe | None = None
    """The semantic cache's look at it (docs/cache.md#semantic-cache), when it had one."""

    @property
    def filled_by(self) -> tuple[str, str] | None:
        """A hit's source: the request whose answer it is, and that request's account."""
        if self.answer is not None:
            return self.answer.filled_by, self.answer.account_id
        flight = self.flight
        if flight is not None and flight.answer is not None:
            return flight.answer.filled_by, flight.answer.account_id
        if flight is not None:
            return flight.leader, flight.account_id
        return None

    def release(self) -> None:
        """A joiner no longer reads its flight (it ended, left, or was refused)."""
        if self.reading and self.flight is not None:
            self.reading = False
            self.flight.readers -= 1


class Asker(NamedTuple):
    """Who looks an answer up: the request, its account, its output guardrails, and
    whether its key may read from the cache and fill it."""

    request_id: str
    account_id: str
    output_rules: object
    may_read: bool = True
    may_fill: bool = True

    @classmethod
    def of(cls, request_id: str, principal: Principal, output_rules: object) -> Asker:
        policy = principal.policy
        return cls(
            request_id,
            principal.account_id,
            output_rules,
            may_read=policy.cache_read,
            may_fill=policy.cache_fill,
        )


async def looked_up(
    req: ChatRequest,
    plan: Plan,
    asker: Asker,
    incoming: Mapping[str, str],
    *,
    store: AnswerStore,
    flights: Flights,
) -> CacheNote | None:
    """The cache's part in ``req``: None when its model is not cached; ``bypass`` when
    it may neither read nor fill (``no-store``, its key); else a hit (served as the
    attempt the answer came from, when the plan still has it, or joining the flight of
    an identical request whose output guardrails are the same) or a miss, which leads a
    flight of its own."""
    config = plan.cache
    if config is None:
        return None
    reads, fills = _controlled(req, asker, incoming)
    if not reads and not fills:
        return CacheNote("bypass", config, reads=False, fills=False)
    scope = asker.account_id if config.scope == "account" else "global"
    key = cache_key(req, plan, scope)
    if reads:
        answer = await store.get(key)
        attempt = None if answer is None else attempt_of(plan, answer)
        if answer is not None and attempt is not None:
            return CacheNote("hit", config, key, answer, attempt)
        flight = flights.joinable(key, asker.output_rules) if req.is_stream else None
        if flight is not None:
            flight.readers += 1
            return CacheNote("hit", config, key, flight=flight, reading=True)
    if not req.is_stream or not fills:  # a whole answer neither joins nor leads a flight
        return CacheNote("miss", config, key, reads=reads, fills=fills)
    most = store.max_entry_bytes
    flight = Flight(
        asker.request_id, asker.account_id, asker.output_rules, clock=flights.clock, most=most
    )
    flights.lead(key, flight)
    return CacheNote("miss", config, key, leading=flight, reads=reads)


def _controlled(req: ChatRequest, asker: Asker, incoming: Mapping[str, str]) -> tuple[bool, bool]:
    """May the request be answered from the cache, and its answer kept: its key's say,
    then ``Cache-Control`` (the header, or the body's ``cache``)."""
    control = incoming.get("cache-control", "").lower()
    hints = req.cache
    no_cache = "no-cache" in control or (isinstance(hints, CacheHints) and hints.no_cache is True)
    no_store = "no-store" in control or (isinstance(hints, CacheHints) and hints.no_store is True)
    return asker.may_read and not no_cache and not no_store, asker.may_fill and not no_store


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


def held_rate(note: CacheNote | None, rate: Rate) -> Rate:
    """The rate a request's credit is held at: a joiner's is the full ``rate`` (it goes
    upstream itself when the flight it joined is left before its first event)."""
    return rate if note is not None and note.flight is not None else hit_rate(note, rate)


def refused(note: CacheNote, flights: Flights) -> None:
    """The request was not admitted: it reads no flight, and the one it led is left
    (its joiners go upstream themselves)."""
    note.release()
    if note.leading is not None and note.key is not None:
        note.leading.abandoned()
        flights.landed(note.key, note.leading)


def landed(state: ExchangeState, flights: Flights, store: AnswerStore) -> bool:
    """At settlement: a flight this request led ends (if its stream did not say how)
    and leaves ``flights``, its answer kept when it qualifies (:func:`_keep`); a flight
    it joined is no longer read by it. True when the answer was kept."""
    note, flight = state.cache, state.flight
    if note is None:
        return False
    note.release()
    if note.key is None or note.outcome != "miss" or not note.fills:
        return False
    complete = state.completed and state.error is None
    if flight is None:  # a whole answer (a stream without a flight is not kept)
        if state.req.is_stream:
            return False
        whole = complete and state.disconnect is None and not _cut(state)
        return whole and bool(store.max_bytes) and _keep(state, note, store, _whole(state))
    if state.error is not None and state.disconnect is None:
        flight.failed(state.error)
    flight.abandoned()
    flights.landed(note.key, flight)
    read_on = state.disconnect == "drain" and not flight.output_rules  # no guard skipped
    whole = complete and flight.keepable and (state.disconnect is None or read_on)
    return whole and bool(store.max_bytes) and _keep(state, note, store, flight.answer)


def handed(note: CacheNote, found: CacheNote, flights: Flights) -> None:
    """A miss found a kept answer after all (by meaning): the requests that joined its
    flight are served that answer, and the flight is done."""
    flight, answer, attempt = note.leading, found.answer, found.served_as
    if flight is None or note.key is None:
        return
    if answer is not None and attempt is not None:
        flight.replayed(attempt, answer)
    flight.abandoned()
    flights.landed(note.key, flight)


def unjoined(note: CacheNote, told: tuple[list[tuple[str, str]], ...], *, sent: bool) -> CacheNote:
    """A joiner whose flight was left before its first event goes upstream itself,
    unrecorded: a miss, charged and logged so, which each header list in ``told`` says
    unless its head already went out (a keep-alive while it waited: it said ``hit``)."""
    note.release()
    for headers in () if sent else told:
        headers[:] = [(n, "miss" if n == CACHE_HEADER else v) for n, v in headers]
    return CacheNote("miss", note.config, note.key)


def finished(state: ExchangeState) -> None:
    """A led stream read to its end: its flight's joiners get the answer's end."""
    flight, attempt, translator = state.flight, state.attempt, state.translator
    tokens = state.tokens()
    if flight is None or attempt is None or translator is None or tokens is None:
        return
    flight.finished(
        CachedAnswer(
            filled_by=state.request_id,
            account_id=state.principal.account_id,
            served_as=_served_as(attempt),
            tokens=tokens,
            finish_reason=state.finish_reason(),
            tool_calls=translator.emitter.tool_calls(),
            batches=flight.batches,
            offsets=flight.offsets,
        )
    )


def _keep(
    state: ExchangeState, note: CacheNote, store: AnswerStore, answer: CachedAnswer | None
) -> bool:
    """A complete answer stored when its usage was reported, it fits, the cache that
    applies served it and no output guardrail changed or skipped it."""
    attempt = state.attempt
    if answer is None or attempt is None or note.key is None or answer.tokens.estimated:
        return False
    if not _covered(state, attempt):
        return False
    if any(n.stage == "output" and n.outcome in _UNCACHED for n in state.guardrails):
        return False
    return store.put(note.key, answer, note.config.ttl)


def _cut(state: ExchangeState) -> bool:
    completion = state.completion
    return completion is None or any(c.finish_reason in CUT for c in completion.choices)


def _whole(state: ExchangeState) -> CachedAnswer | None:
    """A whole answer as the cache keeps it (:func:`~sluice.cache.whole.unfolded`)."""
    completion, attempt = state.completion, state.attempt
    if completion is None or completion.usage is None or attempt is None:
        return None
    calls = [
        EmittedCall(c.index, i, t.id, t.function.name, t.function.arguments)
        for c in completion.choices
        for i, t in enumerate(c.message.tool_calls or ())
    ]
    return CachedAnswer(
        filled_by=state.request_id,
        account_id=state.principal.account_id,
        served_as=_served_as(attempt),
        tokens=completion.usage,
        finish_reason=state.finish_reason(),
        tool_calls=calls,
        batches=[unfolded(completion.choices)],
        offsets=[0.0],
    )


def _covered(state: ExchangeState, attempt: Attempt) -> bool:
    """Did the cache that applies serve it: not a model's configured fallback, and for
    a model asked by name, that model (a route's cache covers its targets)?"""
    plan = state.plan
    if plan is None or attempt.fallback:
        return False
    return plan.route_name is not None or attempt.model.id == plan.attempts[0].model.id
