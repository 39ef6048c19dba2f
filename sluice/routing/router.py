"""Trying a plan's attempts in order until one produces its first event
(docs/api.md#models-and-routes).

Failover is only possible before the client has seen anything: an attempt is
"opened" when its upstream produced a chunk with content, reasoning, a tool call or a
finish reason. Role-only chunks are held back until then, so an upstream that dies
after its role chunk is still failed over. Every attempt is recorded.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from functools import partial
from random import Random
from types import MappingProxyType
from typing import TypeVar

import msgspec

from sluice.core.connection import Target, Timeouts
from sluice.errors import ApiError, RequestTimeoutError, ServiceUnavailableError, UpstreamError
from sluice.providers.base import ParsedCompletion
from sluice.providers.errors import error_for_status, malformed_response, retry_after_seconds
from sluice.providers.normalize import canonical_choices
from sluice.providers.registry import AdapterRegistry
from sluice.redaction import Redactor
from sluice.routing.breaker import Breaker, State
from sluice.routing.plan import Attempt, Plan
from sluice.routing.policy import weighted_order
from sluice.routing.upstream import UpstreamStream
from sluice.transport.failures import RequestNotSentError, deadline_error, log_refusal
from sluice.transport.http import HttpTransport, UpstreamResponse
from sluice.wire.chat import ChatRequest

_T = TypeVar("_T")
_NO_HEADERS: Mapping[str, str] = MappingProxyType({})

TryStarted = Callable[[int], Mapping[str, str]]
"""Told as each try that may reach its upstream starts, with the index its record will
take among the attempt records: headers to add to its upstream request (tracing's
``traceparent``). Absent, nothing is called and nothing is added."""


class AttemptRecord(msgspec.Struct):
    position: str
    model: str
    connection: str
    provider: str
    outcome: str  # "served" or the error type
    latency_ms: float
    code: str | None = None
    message: str | None = None


class InFlight:
    """A call watched from outside: the attempt running now; ``stopped`` (its client
    left) ends the failover after that attempt."""

    __slots__ = ("attempt", "stopped")

    def __init__(self) -> None:
        self.attempt: Attempt | None = None
        self.stopped = False


class Completed(msgspec.Struct):
    attempt: Attempt
    result: ParsedCompletion


def first_event_timeout(timeouts: Timeouts, what: str) -> RequestTimeoutError:
    """The error when nothing came within ``first_event`` seconds, or within ``total``
    when that is shorter (both fail over: the client has seen nothing)."""
    if timeouts.total < timeouts.first_event:
        return deadline_error(timeouts.total)
    return RequestTimeoutError(
        f"The provider {what} within {timeouts.first_event:g} s.",
        code="first_event_timeout",
        http_status=504,
    )


def _groups(attempts: tuple[Attempt, ...]) -> list[list[Attempt]]:
    """Attempts grouped by position, in plan order."""
    groups: list[list[Attempt]] = []
    for attempt in attempts:
        if groups and groups[-1][0].position == attempt.position:
            groups[-1].append(attempt)
        else:
            groups.append([attempt])
    return groups


def _try_headers(traced: TryStarted | None, records: list[AttemptRecord]) -> Mapping[str, str]:
    """The extra headers of the try starting now (its record lands at ``len(records)``)."""
    return _NO_HEADERS if traced is None else traced(len(records))


class Router:
    def __init__(
        self,
        *,
        registry: AdapterRegistry,
        transport: HttpTransport,
        breaker: Breaker,
        clock: Callable[[], float],
        rng: Random,
        error_body_bytes: int,
        body_bytes: int,
    ) -> None:
        self._registry = registry
        self._transport = transport
        self.breaker = breaker
        self._clock = clock
        self._rng = rng
        self._error_body_bytes = error_body_bytes
        self._body_bytes = body_bytes

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
            return self._open_stream(req, attempt, fresh, _try_headers(traced, records))

        return await self._run(plan, records, once)

    async def complete(
        self,
        req: ChatRequest,
        plan: Plan,
        records: list[AttemptRecord],
        in_flight: InFlight | None = None,
        traced: TryStarted | None = None,
    ) -> Completed:
        def once(attempt: Attempt, fresh: bool) -> Awaitable[Completed]:
            return self._complete(req, attempt, fresh, _try_headers(traced, records))

        return await self._run(plan, records, once, in_flight)

    async def count_tokens(self, req: ChatRequest, plan: Plan) -> tuple[int, Target] | None:
        """The serving provider's own count of the prompt, and the target that counted:
        the plan's first target whose connection's circuit is closed, if its provider
        has a count endpoint and answers in time; None otherwise, and the caller
        estimates. Not an attempt: not counted for the breaker, and never sent to a
        connection the breaker is holding off or probing."""
        now = self._clock()
        closed = (
            a.target
            for a in self.ordered(plan)
            if self.breaker.state(a.target.connection.id, now) is State.CLOSED
        )
        target = next(closed, None)
        if target is None:
            return None
        conn = target.connection
        adapter = self._registry.adapter(conn.provider)
        upstream = adapter.count_request(req, target)
        if upstream is None:
            return None
        try:
            async with asyncio.timeout(min(conn.timeouts.first_event, conn.timeouts.total)):
                resp = await self._transport.send(
                    upstream, conn.timeouts, guarded=conn.owner is not None, fresh=False
                )
                try:
                    body = await resp.read_body(self._error_body_bytes)
                finally:
                    resp.close()
            return (adapter.parse_count(body), target) if resp.status < 300 else None
        except (ApiError, TimeoutError):
            return None

    def ordered(self, plan: Plan) -> Sequence[Attempt]:
        """The plan's attempts, connections of a weighted model drawn by weight."""
        if not any(a.model.weighted for a in plan.attempts):
            return plan.attempts
        out: list[Attempt] = []
        for group in _groups(plan.attempts):
            if len(group) > 1 and group[0].model.weighted:
                weights = [a.target.connection.weight for a in group]
                out.extend(weighted_order(group, weights, self._rng))
            else:
                out.extend(group)
        return out

    async def _run(
        self,
        plan: Plan,
        records: list[AttemptRecord],
        once: Callable[[Attempt, bool], Awaitable[_T]],
        in_flight: InFlight | None = None,
    ) -> _T:
        """Each try is recorded and counts for the breaker; a request that certainly
        never reached its upstream is tried once more, on a fresh connection
        (``once(attempt, fresh)``), before the next attempt."""
        last: ApiError | None = None
        skipped: list[Attempt] = []
        tries = deque((attempt, False) for attempt in self.ordered(plan))
        while tries:
            attempt, fresh = tries.popleft()
            if in_flight is not None and in_flight.stopped and last is not None:
                raise last
            key = attempt.target.connection.id
            started = self._clock()
            if not self.breaker.allow(key, started):
                skipped.append(attempt)
                records.append(self._record(attempt, started, None, outcome="skipped"))
                continue
            if in_flight is not None:
                in_flight.attempt = attempt
            try:
                result = await once(attempt, fresh)
            except ApiError as exc:
                err = self.scrub(exc, attempt.target)
                records.append(self._record(attempt, started, err))
                if not err.failover:
                    self.breaker.release(key)
                    raise err from None
                self.breaker.failure(key, self._clock(), err.retry_after)
                last = err
                if isinstance(err, RequestNotSentError) and not fresh:
                    tries.appendleft((attempt, True))
                continue
            except BaseException:
                self.breaker.release(key)
                raise
            self.breaker.success(key)
            records.append(self._record(attempt, started, None))
            return result
        if last is not None:
            raise last
        now = self._clock()
        wait = min(self.breaker.reopens_in(a.target.connection.id, now) for a in skipped)
        raise ServiceUnavailableError(
            f"Every connection that serves '{plan.requested_model}' is cooling down after "
            "repeated failures.",
            code="connections_cooling_down",
            retry_after=wait,
        )

    def _record(
        self, attempt: Attempt, started: float, err: ApiError | None, outcome: str = "served"
    ) -> AttemptRecord:
        conn = attempt.target.connection
        return AttemptRecord(
            position=attempt.position,
            model=attempt.target.model_id,
            connection=conn.id,
            provider=conn.provider,
            outcome=outcome if err is None else err.type,
            latency_ms=round((self._clock() - started) * 1000, 3),
            code=None if err is None else err.code,
            message=None if err is None else err.message,
        )

    async def _send(
        self, req: ChatRequest, attempt: Attempt, fresh: bool, extra: Mapping[str, str]
    ) -> UpstreamResponse:
        target = attempt.target
        adapter = self._registry.adapter(target.connection.provider)
        upstream = adapter.build_request(req, target)
        if extra:
            upstream.headers.update(extra)
        conn = target.connection
        resp = await self._transport.send(
            upstream, conn.timeouts, guarded=conn.owner is not None, fresh=fresh
        )
        if resp.status >= 300:
            try:
                body = await resp.read_body(self._error_body_bytes)
            finally:
                resp.close()
            try:
                err = adapter.parse_error(resp.status, resp.headers, body)
            except RecursionError:  # nested too deep to read: the status still tells
                err = error_for_status(
                    resp.status, None, retry_after=retry_after_seconds(resp.headers)
                )
            log_refusal(upstream.url, resp.status, self.scrub(err, target))
            raise err
        return resp

    async def _open_stream(
        self, req: ChatRequest, attempt: Attempt, fresh: bool, extra: Mapping[str, str]
    ) -> UpstreamStream:
        """Send, then read until the first event the client must see (or the end), within
        the connection's first-event timeout."""
        target = attempt.target
        timeouts = target.connection.timeouts
        translator = self._registry.adapter(target.connection.provider).stream(req)
        stream: UpstreamStream | None = None
        try:
            async with asyncio.timeout(min(timeouts.first_event, timeouts.total)):
                resp = await self._send(req, attempt, fresh, extra)
                stream = UpstreamStream(
                    attempt, resp, translator, partial(self.scrub, target=target)
                )
                await stream.open(timeouts.stall)
        except TimeoutError:
            if stream is not None:
                stream.close()
            raise first_event_timeout(timeouts, "sent nothing") from None
        except BaseException:
            if stream is not None:
                stream.close()
            raise
        return stream

    async def _complete(
        self, req: ChatRequest, attempt: Attempt, fresh: bool, extra: Mapping[str, str]
    ) -> Completed:
        timeouts = attempt.target.connection.timeouts
        adapter = self._registry.adapter(attempt.target.connection.provider)
        try:
            async with asyncio.timeout(min(timeouts.first_event, timeouts.total)):
                resp = await self._send(req, attempt, fresh, extra)
        except TimeoutError:
            raise first_event_timeout(timeouts, "did not answer") from None
        resp.watch(timeouts.stall)
        try:
            body = await resp.read_body(self._body_bytes + 1)
        except BaseException:
            resp.close()
            raise
        if len(body) > self._body_bytes:
            resp.close()
            raise UpstreamError(
                f"The provider's answer is larger than {self._body_bytes} bytes.",
                code="upstream_response_too_large",
            )
        resp.release()
        if not body:
            raise UpstreamError("The provider sent an empty response.", code="upstream_empty")
        try:
            parsed = adapter.parse_response(resp.status, resp.headers, body)
        except RecursionError:
            raise malformed_response() from None
        choices, repairs = canonical_choices(parsed.choices, req.choice_count)
        return Completed(attempt, ParsedCompletion(choices, parsed.usage, repairs))
