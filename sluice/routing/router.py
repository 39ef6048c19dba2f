"""Trying a plan's attempts in order until one produces its first event (SPEC §4).

Failover is only possible before the client has seen anything: an attempt is
"opened" when its upstream produced a chunk with content, reasoning, a tool call or a
finish reason. Role-only chunks are held back until then, so an upstream that dies
after its role chunk is still failed over. Every attempt is recorded.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable, Sequence
from random import Random
from typing import TypeVar

import msgspec

from sluice.errors import ApiError, RequestTimeoutError, ServiceUnavailableError, UpstreamError
from sluice.providers.base import ChunkBatch, ParsedCompletion, StreamTranslator, Target
from sluice.providers.registry import AdapterRegistry
from sluice.routing.breaker import Breaker
from sluice.routing.plan import Attempt, Plan
from sluice.routing.policy import weighted_order
from sluice.transport.http import HttpTransport, UpstreamResponse
from sluice.wire.chat import ChatRequest
from sluice.wire.chunks import Choice

_SECRETISH = re.compile(
    r"\b(?:sk|pk|rk)-[A-Za-z0-9_\-]{8,}|\bAIza[0-9A-Za-z_\-]{35}\b|\bBearer\s+\S+",
    re.IGNORECASE,
)
_MAX_COMPLETION_BYTES = 64 * 1024 * 1024
_T = TypeVar("_T")


class AttemptRecord(msgspec.Struct):
    position: str
    model: str
    connection: str
    provider: str
    outcome: str  # "served" or the error type
    latency_ms: float
    code: str | None = None
    message: str | None = None


class OpenedStream(msgspec.Struct):
    attempt: Attempt
    response: UpstreamResponse
    translator: StreamTranslator
    first: ChunkBatch
    ended: bool


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


def _has_event(batch: ChunkBatch) -> bool:
    """A chunk the client must see: anything beyond the role chunk."""
    for choices in batch:
        choice: Choice = choices[0]
        if choice.finish_reason is not None or choice.delta.role is msgspec.UNSET:
            return True
    return False


def scrub_secrets(err: ApiError, target: Target) -> ApiError:
    """Upstream messages can quote credentials; they never reach the client."""
    message = err.message
    key = target.connection.api_key
    if key is not None and key.reveal():
        message = message.replace(key.reveal(), "[redacted]")
    message = _SECRETISH.sub("[redacted]", message)
    if message != err.message:
        err.message = message
        err.args = (message,)
    return err


def _groups(attempts: tuple[Attempt, ...]) -> list[list[Attempt]]:
    """Attempts grouped by position, in plan order."""
    groups: list[list[Attempt]] = []
    for attempt in attempts:
        if groups and groups[-1][0].position == attempt.position:
            groups[-1].append(attempt)
        else:
            groups.append([attempt])
    return groups


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
    ) -> None:
        self._registry = registry
        self._transport = transport
        self.breaker = breaker
        self._clock = clock
        self._rng = rng
        self._error_body_bytes = error_body_bytes

    async def open_stream(
        self, req: ChatRequest, plan: Plan, records: list[AttemptRecord]
    ) -> OpenedStream:
        return await self._run(plan, records, lambda a: self._open_stream(req, a))

    async def complete(
        self,
        req: ChatRequest,
        plan: Plan,
        records: list[AttemptRecord],
        in_flight: InFlight | None = None,
    ) -> Completed:
        return await self._run(plan, records, lambda a: self._complete(req, a), in_flight)

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
        once: Callable[[Attempt], Awaitable[_T]],
        in_flight: InFlight | None = None,
    ) -> _T:
        last: ApiError | None = None
        skipped: list[Attempt] = []
        for attempt in self.ordered(plan):
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
                result = await once(attempt)
            except ApiError as exc:
                err = scrub_secrets(exc, attempt.target)
                records.append(self._record(attempt, started, err))
                if not err.failover:
                    self.breaker.release(key)
                    raise err from None
                self.breaker.failure(key, self._clock(), err.retry_after)
                last = err
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

    async def _send(self, req: ChatRequest, attempt: Attempt) -> UpstreamResponse:
        target = attempt.target
        adapter = self._registry.adapter(target.connection.provider)
        upstream = adapter.build_request(req, target)
        resp = await self._transport.send(
            upstream, target.connection.timeouts, guarded=target.connection.owner is not None
        )
        if resp.status >= 300:
            try:
                body = await resp.read_body(self._error_body_bytes)
            finally:
                resp.close()
            raise adapter.parse_error(resp.status, resp.headers, body)
        return resp

    async def _open_stream(self, req: ChatRequest, attempt: Attempt) -> OpenedStream:
        """Send, then read until the first event the client must see (or the end), within
        the connection's first-event timeout; then hand over with the stall watch on."""
        timeouts = attempt.target.connection.timeouts
        translator = self._registry.adapter(attempt.target.connection.provider).stream(req)
        held: ChunkBatch = []
        resp: UpstreamResponse | None = None
        try:
            async with asyncio.timeout(timeouts.first_event):
                resp = await self._send(req, attempt)
                while True:
                    data = await resp.read_chunk()
                    if not data:
                        held.extend(translator.finish())
                        return OpenedStream(attempt, resp, translator, held, ended=True)
                    batch = translator.feed(data)
                    held.extend(batch)
                    if _has_event(batch):
                        resp.watch(timeouts.stall)
                        return OpenedStream(attempt, resp, translator, held, ended=False)
                    if translator.failure is not None:
                        raise translator.failure
        except TimeoutError:
            if resp is not None:
                resp.close()
            raise RequestTimeoutError(
                f"The provider sent nothing within {timeouts.first_event:g} s.",
                code="first_event_timeout",
                http_status=504,
            ) from None
        except BaseException:
            if resp is not None:
                resp.close()
            raise

    async def _complete(self, req: ChatRequest, attempt: Attempt) -> Completed:
        timeouts = attempt.target.connection.timeouts
        adapter = self._registry.adapter(attempt.target.connection.provider)
        try:
            async with asyncio.timeout(timeouts.first_event):
                resp = await self._send(req, attempt)
        except TimeoutError:
            raise RequestTimeoutError(
                f"The provider did not answer within {timeouts.first_event:g} s.",
                code="first_event_timeout",
                http_status=504,
            ) from None
        resp.watch(timeouts.stall)
        try:
            body = await resp.read_body(_MAX_COMPLETION_BYTES)
        except BaseException:
            resp.close()
            raise
        resp.release()
        if not body:
            raise UpstreamError("The provider sent an empty response.", code="upstream_empty")
        return Completed(attempt, adapter.parse_response(resp.status, resp.headers, body))
