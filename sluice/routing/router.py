"""Trying a plan's attempts in order until one produces its first event
(docs/api.md#models-and-routes).

Failover is only possible before the client has seen anything: an attempt is
"opened" when its upstream produced a chunk with content, reasoning, a tool call or a
finish reason. Role-only chunks are held back until then, so an upstream that dies
after its role chunk is still failed over. Every try is recorded
(:mod:`sluice.routing.attempts`) and counts for the breaker; one try on one connection
is :class:`sluice.routing.caller.UpstreamCaller`'s.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from random import Random
from typing import TypeVar

from sluice.core.connection import Target
from sluice.core.embedding import EmbedCall
from sluice.errors import ApiError, ServiceUnavailableError
from sluice.providers.registry import AdapterRegistry
from sluice.redaction import Redactor
from sluice.routing.attempts import (
    AttemptRecord,
    InFlight,
    TryStarted,
    attempt_record,
    try_headers,
)
from sluice.routing.breaker import Breaker, Circuit, State
from sluice.routing.caller import Completed, Embeddings, UpstreamCaller
from sluice.routing.hedge import Hedge, HedgeBudget, race
from sluice.routing.order import ordered_attempts
from sluice.routing.plan import Attempt, Plan
from sluice.routing.speeds import Speeds
from sluice.routing.upstream import UpstreamStream
from sluice.transport.failures import RequestNotSentError
from sluice.transport.port import Transport
from sluice.wire.chat import ChatRequest

_T = TypeVar("_T")


_log = logging.getLogger("sluice.routing")


def circuit_of(attempt: Attempt) -> Circuit:
    """The breaker's circuit an attempt counts for: its connection and model."""
    return attempt.target.connection.id, attempt.target.model_id


class Router:
    def __init__(
        self,
        *,
        registry: AdapterRegistry,
        transport: Transport,
        breaker: Breaker,
        clock: Callable[[], float],
        rng: Random,
        error_body_bytes: int,
        body_bytes: int,
        hedge_budget: float = 0.0,
        speeds: Speeds | None = None,
    ) -> None:
        self._transport = transport
        self._caller = UpstreamCaller(
            registry=registry,
            transport=transport,
            scrub=self.scrub,
            error_body_bytes=error_body_bytes,
            body_bytes=body_bytes,
        )
        self.breaker = breaker
        self._clock = clock
        self._rng = rng
        self._hedges = HedgeBudget(hedge_budget)
        self.speeds = speeds if speeds is not None else Speeds()

    def scrub(self, err: ApiError, target: Target) -> ApiError:
        """An error of an attempt on ``target`` with that request's credentials (and
        anything credential-like) taken out of every field: upstreams quote them."""
        key = target.connection.api_key
        secrets = [key.reveal()] if key is not None else []
        return Redactor([*secrets, *self._transport.signing_secrets()]).error(err)

    async def open_stream(
        self,
        req: ChatRequest,
        plan: Plan,
        records: list[AttemptRecord],
        traced: TryStarted | None = None,
    ) -> UpstreamStream:
        def once(attempt: Attempt, fresh: bool) -> Awaitable[UpstreamStream]:
            opening = self._caller.open_stream(req, attempt, fresh, try_headers(traced, records))
            return self._timed(attempt, opening) if attempt.model.fastest else opening

        ceiling = req.output_ceiling
        if plan.hedged:
            return await self._hedged(plan, self.ordered(plan, ceiling), records, once)
        return await self._run(plan, records, once, ceiling=ceiling)

    async def _timed(self, attempt: Attempt, opening: Awaitable[UpstreamStream]) -> UpstreamStream:
        """An attempt of a fastest model: its time to first event feeds its estimate."""
        started = self._clock()
        try:
            stream = await opening
        except ApiError as err:
            if err.failover:  # the connection failed it (a bad request is no news)
                self.speeds.failed(circuit_of(attempt), self._clock() - started)
            raise
        except BaseException:  # lost a hedge, cancelled: at least this slow
            self.speeds.no_sooner_than(circuit_of(attempt), self._clock() - started)
            raise
        self.speeds.opened(circuit_of(attempt), self._clock() - started)
        return stream

    async def complete(
        self,
        req: ChatRequest,
        plan: Plan,
        records: list[AttemptRecord],
        in_flight: InFlight | None = None,
        traced: TryStarted | None = None,
    ) -> Completed:
        def once(attempt: Attempt, fresh: bool) -> Awaitable[Completed]:
            return self._caller.complete(req, attempt, fresh, try_headers(traced, records))

        return await self._run(plan, records, once, in_flight, ceiling=req.output_ceiling)

    async def embed(
        self,
        call: EmbedCall,
        plan: Plan,
        records: list[AttemptRecord],
        traced: TryStarted | None = None,
    ) -> Embeddings:
        """Every vector of ``call`` from the first attempt that answers all of them."""

        async def once(attempt: Attempt, fresh: bool) -> Embeddings:
            headers = try_headers(traced, records)
            return Embeddings(attempt, await self._caller.embed(call, attempt, fresh, headers))

        return await self._run(plan, records, once)

    async def count_tokens(self, req: ChatRequest, plan: Plan) -> tuple[int, Target] | None:
        """The serving provider's own count of the prompt, and the target that counted:
        the plan's first target whose connection's circuit is closed, if its adapter
        counts tokens (:class:`~sluice.providers.base.CountsTokens`) and its provider
        answers in time; None otherwise, and the caller estimates. Not an attempt: not
        counted for the breaker, and never sent to a connection the breaker is holding
        off or probing."""
        now = self._clock()
        closed = (
            a.target
            for a in self.ordered(plan, req.output_ceiling)
            if self.breaker.state(circuit_of(a), now) is State.CLOSED
        )
        target = next(closed, None)
        if target is None:
            return None
        count = await self._caller.count_tokens(req, target)
        return None if count is None else (count, target)

    def ordered(self, plan: Plan, ceiling: int | None = None) -> Sequence[Attempt]:
        """The plan's attempts in the order a call for at most ``ceiling`` output
        tokens tries them."""
        return ordered_attempts(plan, self._rng, self.speeds, ceiling)

    async def _run(
        self,
        plan: Plan,
        records: list[AttemptRecord],
        once: Callable[[Attempt, bool], Awaitable[_T]],
        in_flight: InFlight | None = None,
        *,
        ceiling: int | None = None,
    ) -> _T:
        """Each try is recorded and counts for the breaker; a request that certainly
        never reached its upstream is tried once more, on a fresh connection
        (``once(attempt, fresh)``), before the next attempt."""
        last: ApiError | None = None
        skipped: list[Attempt] = []
        tries = deque((attempt, False) for attempt in self.ordered(plan, ceiling))
        while tries:
            attempt, fresh = tries.popleft()
            if in_flight is not None and in_flight.stopped and last is not None:
                raise last
            if not self._allowed(attempt, records):
                skipped.append(attempt)
                continue
            if in_flight is not None:
                in_flight.attempt = attempt
            try:
                return await self._try(attempt, fresh, records, once)
            except ApiError as err:
                if not err.failover:
                    raise
                last = err
                if isinstance(err, RequestNotSentError) and not fresh:
                    tries.appendleft((attempt, True))
        raise self._exhausted(plan, last, skipped)

    async def _hedged(
        self,
        plan: Plan,
        attempts: Sequence[Attempt],
        records: list[AttemptRecord],
        once: Callable[[Attempt, bool], Awaitable[UpstreamStream]],
        *,
        race_of: Hedge | None = None,
    ) -> UpstreamStream:
        """:meth:`_run` for a stream whose plan hedges: an attempt with ``hedge_after``
        that has not opened by then races the rest of the plan (:func:`.hedge.race`),
        within the budget. The rest, started as a hedge (``race_of``), hedges no more:
        one hedge per request."""
        hedged = race_of is not None
        last: ApiError | None = None
        skipped: list[Attempt] = []
        for i, attempt in enumerate(attempts):
            if not self._allowed(attempt, records, hedged):
                skipped.append(attempt)
                continue
            rest = attempts[i + 1 :]
            if attempt.hedge_after is None or not rest or hedged:
                try:
                    return await self._fresh(attempt, records, once, race_of, hedged=hedged)
                except ApiError as err:
                    if not err.failover:
                        raise
                    last = err
                    continue
            hedge = Hedge(attempt.hedge_after)
            first = asyncio.ensure_future(self._fresh(attempt, records, once, hedge))
            try:
                await asyncio.wait_for(asyncio.shield(first), hedge.after)
            except TimeoutError:
                pass
            except ApiError as err:
                if not err.failover:
                    raise
                last = err
                continue
            except BaseException:
                first.cancel()
                raise
            if first.done() or not self._hedges.take():
                try:
                    return await first
                except ApiError as err:
                    if not err.failover:
                        raise
                    last = err
                    continue
            stream, _ = await race(
                first,
                hedge,
                partial(self._hedged, plan, rest, records, once, race_of=hedge),
                UpstreamStream.close,
            )
            return stream
        raise self._exhausted(plan, last, skipped)

    async def _fresh(
        self,
        attempt: Attempt,
        records: list[AttemptRecord],
        once: Callable[[Attempt, bool], Awaitable[UpstreamStream]],
        hedge: Hedge | None,
        *,
        hedged: bool = False,
    ) -> UpstreamStream:
        """A try, once more on a fresh connection when the request certainly never
        reached its upstream (as :meth:`_run` does)."""
        try:
            return await self._try(attempt, False, records, once, hedge=hedge, hedged=hedged)
        except RequestNotSentError:
            return await self._try(attempt, True, records, once, hedge=hedge, hedged=hedged)

    def _allowed(
        self, attempt: Attempt, records: list[AttemptRecord], hedged: bool = False
    ) -> bool:
        """The breaker lets the attempt through; else it is recorded as skipped."""
        started = self._clock()
        if self.breaker.allow(circuit_of(attempt), started):
            return True
        records.append(self._record(attempt, started, None, outcome="skipped", hedged=hedged))
        return False

    async def _try(
        self,
        attempt: Attempt,
        fresh: bool,
        records: list[AttemptRecord],
        once: Callable[[Attempt, bool], Awaitable[_T]],
        *,
        hedge: Hedge | None = None,
        hedged: bool = False,
    ) -> _T:
        """One try the breaker let through: recorded, counted for the breaker; an error
        that allows failover is raised (scrubbed) for the caller to go on."""
        key = circuit_of(attempt)
        started = self._clock()
        try:
            result = await once(attempt, fresh)
        except ApiError as exc:
            err = self.scrub(exc, attempt.target)
            records.append(self._record(attempt, started, err, hedged=hedged))
            if not err.failover:
                self.breaker.release(key)
                raise err from None
            opened = self.breaker.failure(key, self._clock(), err.retry_after)
            if opened:
                _log.warning(
                    "circuit open for %.0f s: connection %s, model %s (%s: %s)",
                    opened, key[0], key[1], err.code, err.message,
                )  # fmt: skip
            raise err from None
        except asyncio.CancelledError:
            self.breaker.release(key)
            if hedge is not None and hedge.decided:  # the other attempt opened first
                lost = self._record(attempt, started, None, "hedge_lost", hedged=hedged)
                records.append(lost)
            raise
        except BaseException:
            self.breaker.release(key)
            raise
        self.breaker.success(key)
        records.append(self._record(attempt, started, None, hedged=hedged))
        return result

    def _exhausted(self, plan: Plan, last: ApiError | None, skipped: list[Attempt]) -> ApiError:
        """What a plan whose every attempt failed or was skipped raises."""
        if last is not None:
            return last
        now = self._clock()
        wait = min(self.breaker.reopens_in(circuit_of(a), now) for a in skipped)
        return ServiceUnavailableError(
            f"Every connection that serves '{plan.requested_model}' is cooling down after "
            "repeated failures.",
            code="connections_cooling_down",
            retry_after=wait,
        )

    def _record(
        self,
        attempt: Attempt,
        started: float,
        err: ApiError | None,
        outcome: str = "served",
        hedged: bool = False,
    ) -> AttemptRecord:
        return attempt_record(attempt, self._clock() - started, err, outcome, hedged=hedged)
