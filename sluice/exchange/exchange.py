"""One request's life, from admission to its request-log row, whatever its wire format.

:meth:`Exchange.run` reads top to bottom: admit (rate limit, input guardrails, plan,
credit hold), run (stream, or answer whole: :mod:`.streaming`, :mod:`.completion`),
then settle (the hold, the rate-limit tokens, the request-log row), however it ended.
It takes the internal request and hands internal events to its front door, which
alone knows the wire format. A failure before the response started is the door's
error body; after, the door's error event, and the connection closes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any

from sluice.core.principal import KeyPolicy, Principal
from sluice.core.usage import Price
from sluice.errors import (
    ApiError,
    PermissionDeniedError,
    ShuttingDownError,
)
from sluice.exchange.admission import admitted, token_subject
from sluice.exchange.cached import (
    CACHE_HEADER,
    Asker,
    CacheNote,
    held_rate,
    landed,
    looked_up,
    refused,
)
from sluice.exchange.failures import answer_failure, answer_shutdown, unexpected_failure
from sluice.exchange.ports import (
    ClientGoneError,
    ClientStream,
    FrontDoor,
    Headers,
    Remembering,
    StreamEncoder,
)
from sluice.exchange.record import request_record
from sluice.exchange.refusals import REFUSAL_STATUSES, held
from sluice.exchange.semantic import indexed, similar
from sluice.exchange.services import Services
from sluice.exchange.state import ExchangeState
from sluice.exchange.telemetry import RequestTrace
from sluice.exchange.work import Work
from sluice.guardrails.checks import check_input
from sluice.guardrails.selection import RuleSet
from sluice.limits.base import LimiterUnavailableError
from sluice.limits.decision import Ticket as LimitTicket
from sluice.metering.charges import Rate, hold_amount, priced_plan, resolve_rate
from sluice.routing.attempts import AttemptRecord, TryStarted
from sluice.routing.capabilities import capable_plan, extra_fields
from sluice.routing.catalog import CatalogModel
from sluice.routing.plan import Plan, Planner
from sluice.routing.router import circuit_of
from sluice.storage.base import RequestRecord
from sluice.wire.chat import ChatRequest

_log = logging.getLogger("sluice.server")


def _check_models(req: ChatRequest, policy: KeyPolicy, planner: Planner) -> None:
    """The key's allow-list over every model the request may be served as: a name it
    does not list passes when it is an alias of an id it lists."""
    for name in (req.model, *(req.models or ())):
        if policy.allows(name):
            continue
        meant = planner.means(name)
        if meant is None or meant == name or not policy.allows(meant):
            raise PermissionDeniedError(
                f"This API key may not use model '{name}'.",
                code="model_not_allowed",
                param="model",
            )


def _held_rates(
    note: CacheNote | None, plan: Plan, prices: Mapping[str, Price]
) -> list[tuple[CatalogModel, Rate]]:
    """Each attempt's rate for the credit hold (a kept answer's: only the one it is
    served as, at the cache's share)."""
    attempts = plan.attempts if note is None or note.served_as is None else (note.served_as,)
    return [
        (a.model, held_rate(note, resolve_rate(a.model, a.target.connection, prices)))
        for a in attempts
    ]


_READ_ON = frozenset({"drain", "resumable"})
"""A request that reads on after its client left settles when it ends."""


class Exchange:
    """``headers``: the response's own headers (request id, rate limits), shared with the
    server, which sends them on errors raised before the exchange ran. ``incoming``: the
    client's request headers (tracing reads ``traceparent``). ``status``: the HTTP
    status once :meth:`run` ended (499 when the client left)."""

    __slots__ = (
        "_incoming",
        "_limit_ticket",
        "counted",
        "door",
        "headers",
        "memory",
        "record",
        "services",
        "state",
        "status",
        "trace",
        "writer",
    )

    def __init__(
        self,
        services: Services,
        door: FrontDoor,
        writer: ClientStream,
        headers: Headers,
        incoming: Mapping[str, str] | None = None,
        *,
        counted: bool = False,
        memory: Remembering | None = None,
    ) -> None:
        self.services = services
        self.memory = memory
        """The door's memory of its answers, when it keeps them (:meth:`remember`)."""
        self.counted = counted
        """The call was counted against its request limits when it arrived
        (:func:`~.admission.count_call`): only token limits are left to admit."""
        self.door = door
        self.writer = writer
        self.headers = headers
        self.state: ExchangeState | None = None
        self.status = 200
        self.record: RequestRecord | None = None
        """The request-log row, once :meth:`settle` built it (the access log reads it)."""
        self._limit_ticket: LimitTicket | None = None
        self._incoming: Mapping[str, str] = incoming or {}
        self.trace: RequestTrace | None = None
        """This request's spans while tracing is on (``[telemetry]``), else None."""

    @property
    def attempts(self) -> list[AttemptRecord]:
        return [] if self.state is None else self.state.attempts

    @property
    def traced(self) -> TryStarted | None:
        """What the router tells as each try starts (tracing on), else None."""
        return None if self.trace is None else self.trace.attempt

    async def run(
        self,
        req: ChatRequest,
        principal: Principal,
        *,
        work: Work,
        omitted_tools: Sequence[str] = (),
        request_id: str,
        created: int,
        started: float,
    ) -> int:
        """Admit ``req`` on ``work``'s demand, run the work, settle; the HTTP status."""
        state = self.state = ExchangeState(
            req, principal, request_id=request_id, created=created, started=started
        )
        state.omitted_tools = list(omitted_tools)
        self.services.tasks.running(request_id, principal.account_id, self._live_record)
        self.trace = self.services.telemetry.start(req.model, self._incoming)
        status = 200
        try:
            if self.memory is not None:
                state.req = await self.memory.recall(state.req, principal.account_id)
            output = await self._admit(state, work)
            await work.run(self, state, output)
        except ApiError as err:
            status = err.http_status
            if state.error is None:
                state.error = err
            if not state.attempts and status in REFUSAL_STATUSES and not state.replaying:
                await held(self.services, state.principal, err)
            await self._fail(err)
        except (ClientGoneError, asyncio.CancelledError):
            status = self._interrupted(state) if self.writer.interrupted else 499
            raise
        except Exception:
            status = 500
            failure = unexpected_failure(request_id)
            if state.error is None:  # logged as the error it was, not as complete
                state.error = failure
            await self._fail(failure)
        finally:
            self.status = status
            if state.disconnect not in _READ_ON:  # a drain settles when it ends
                self.settle(status)
        return status

    async def _admit(self, state: ExchangeState, work: Work) -> RuleSet:
        """Rate limits first (a refused request costs nothing downstream), then the input
        guardrails (before routing and any hold, docs/api.md#guardrails), the plan (cut to
        the attempts whose model can do what the work needs, and for a metered account
        to the priced ones) and the credit hold, on the work's estimate and demand, not
        the request's body. Returns the output guardrails that apply."""
        services, principal = self.services, state.principal
        if services.log.behind:  # the books first: docs/metering.md#what-a-crash-can-lose
            await services.log.catch_up()
        view = await services.tenants.view(principal.account_id)
        _check_models(state.req, principal.policy, view.planner)
        subject = token_subject(services, principal, self.counted)
        if subject is not None:
            estimate = work.prompt_estimate(state.req)
            decision = admitted(await services.limiter.admit(subject, estimate), self.headers)
            self._limit_ticket = decision.ticket
        rules = services.guardrails.select(principal, state.req.model)
        if rules.input:
            state.req = await check_input(
                state.req, rules.input, request_id=state.request_id, notes=state.guardrails
            )
        req = state.req
        demand = work.demand(req)
        state.prices = view.prices
        plan = view.planner.plan(req.model, req.models or ()).within(principal.policy.allows)
        plan = capable_plan(plan, work.needs(req), extra_fields(req))
        if principal.metered:
            plan = priced_plan(plan, view.prices)
        state.plan = plan
        note = None
        if plan.cache is not None:  # a model without a cache awaits no lookup
            asker = Asker.of(state.request_id, principal, rules.output)
            note = await looked_up(
                req, plan, asker, self._incoming, store=services.answers, flights=services.flights
            )
        try:  # whatever ends the request now, a flight it leads is let go
            if note is not None:
                note = await similar(services, state, note)
            state.ticket = await services.meter.hold(
                principal,
                state.request_id,
                hold_amount(demand, _held_rates(note, plan, view.prices)),
                capped=demand.output_ceiling is not None,
            )
        except BaseException:
            if note is not None:
                refused(note, services.flights)
            raise
        if note is not None:  # admitted: what the cache does is told now
            state.cache, state.flight = note, note.leading
            self.headers.append((CACHE_HEADER, note.outcome))
        return rules.output

    def remember(self, state: ExchangeState, answer: StreamEncoder | bytes) -> None:
        """The answer is complete: the door's memory may keep it."""
        if self.memory is not None:
            principal = state.principal
            state.stored = self.memory.remember(
                state.req, principal.account_id, state.request_id, answer
            )

    def drain(
        self, work: Callable[[], Coroutine[Any, Any, None]], disconnect: str = "drain"
    ) -> asyncio.Task[None] | None:
        """Read on after the client left (``on_disconnect = "drain"``, or a resumable
        stream): settled when ``work()`` ends. None, nothing started, once the gateway
        is stopping."""
        state = self.state
        assert state is not None
        task = self.services.tasks.drain(
            work,
            started=state.started,
            request_id=state.request_id,
            then=lambda: self.settle(200 if state.completed and disconnect != "drain" else 499),
        )
        if task is not None:
            state.disconnect = disconnect
        return task

    def settle(self, status: int) -> None:
        """Settle the hold, queue the rate-limit tokens and the request-log row (no I/O
        here: both are written off the response path)."""
        state, services = self.state, self.services
        assert state is not None
        if state.disconnect is None and status == 499:
            state.disconnect = "cancel"
        tokens = state.tokens()
        charged = state.charge(tokens)
        if self._limit_ticket is not None:
            total = 0 if tokens is None else tokens.total_tokens
            services.tasks.background(self._finish_limits(self._limit_ticket, total))
        if state.ticket is not None:
            served = state.attempt
            services.meter.settle(
                state.ticket,
                charged,
                None
                if served is None
                else (served.target.model_id, served.target.connection.provider),
            )
        duration = services.clock() - state.started
        if landed(state, services.flights, services.answers):
            indexed(state.cache, services.vectors)
        if state.completed and state.req.stream is True and tokens is not None:
            self._timed(state, tokens.completion_tokens, duration)
        self.record = request_record(
            state,
            http_status=status,
            duration=duration,
            tokens=tokens,
            charged=charged,
            front_door=self.door.name,
        )
        refusal = not state.attempts and not state.replaying and status in REFUSAL_STATUSES
        if refusal and state.error is not None:
            services.repeats.log(self.record)
        else:
            services.log.log(self.record)
        services.metrics.ran(self.record)  # here, not when the response ends: a drain settles later
        if self.trace is not None:
            self.trace.end(self.record, state)
        services.tasks.finished(state.request_id, state.principal.account_id)

    def _timed(self, state: ExchangeState, tokens: int, duration: float) -> None:
        """A stream read whole on a ``fastest`` model: its pace feeds the estimates."""
        served, first = state.attempt, state.first_token
        if (
            served is not None
            and served.model.fastest
            and first is not None
            and not state.replaying
        ):
            self.services.router.speeds.streamed(circuit_of(served), tokens, duration - first)

    def _live_record(self) -> RequestRecord:
        """The request-log row so far, for ``GET /v1/requests/{id}`` while it runs."""
        state, services = self.state, self.services
        assert state is not None
        tokens = state.tokens()
        record = request_record(
            state,
            http_status=0,
            duration=services.clock() - state.started,
            tokens=tokens,
            charged=state.charge(tokens),
            front_door=self.door.name,
        )
        record.status = "in_progress"
        return record

    async def _finish_limits(self, ticket: LimitTicket, total_tokens: int) -> None:
        try:
            await self.services.limiter.finish(ticket, total_tokens)
        except LimiterUnavailableError:
            _log.warning("could not settle rate-limit tokens: limiter unavailable")

    def _interrupted(self, state: ExchangeState) -> int:
        """Cut by shutdown: the last event (with the usage so far, when asked for) or a
        503 goes out now; the request log says ``shutdown``. Returns the status."""
        err = state.error = ShuttingDownError()
        usage = self.writer.started and state.req.include_usage
        tally = state.tally(cut=True, credits=False) if usage else None
        return answer_shutdown(self.writer, err, self.headers, self.door, tally)

    async def _fail(self, err: ApiError) -> None:
        await answer_failure(self.writer, err, self.headers, self.door)
