"""Trying a plan's attempts in order until one produces its first event (SPEC §4).

Failover is only possible before the client has seen anything: an attempt is
"opened" when its upstream produced a chunk with content, reasoning, a tool call or a
finish reason. Role-only chunks are held back until then, so an upstream that dies
after its role chunk is still failed over. Every attempt is recorded.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import TypeVar

import msgspec

from sluice.errors import ApiError, UpstreamError
from sluice.providers.base import ChunkBatch, ParsedCompletion, StreamTranslator, Target
from sluice.providers.registry import AdapterRegistry
from sluice.routing.plan import Attempt, Plan
from sluice.transport.http import HttpTransport, UpstreamResponse
from sluice.wire.chat import ChatRequest
from sluice.wire.chunks import Choice

_SECRETISH = re.compile(r"\b(?:sk|pk|rk)-[A-Za-z0-9_\-]{8,}|\bBearer\s+\S+", re.IGNORECASE)
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


class Router:
    def __init__(
        self,
        registry: AdapterRegistry,
        transport: HttpTransport,
        clock: Callable[[], float],
        error_body_bytes: int,
    ) -> None:
        self._registry = registry
        self._transport = transport
        self._clock = clock
        self._error_body_bytes = error_body_bytes

    async def open_stream(
        self, req: ChatRequest, plan: Plan, records: list[AttemptRecord]
    ) -> OpenedStream:
        return await self._run(plan, records, lambda a: self._open_stream(req, a))

    async def complete(
        self, req: ChatRequest, plan: Plan, records: list[AttemptRecord]
    ) -> Completed:
        return await self._run(plan, records, lambda a: self._complete(req, a))

    async def _run(
        self, plan: Plan, records: list[AttemptRecord], once: Callable[[Attempt], Awaitable[_T]]
    ) -> _T:
        last: ApiError | None = None
        for attempt in plan.attempts:
            started = self._clock()
            try:
                result = await once(attempt)
            except ApiError as exc:
                err = scrub_secrets(exc, attempt.target)
                records.append(self._record(attempt, started, err))
                if not err.failover:
                    raise err from None
                last = err
                continue
            records.append(self._record(attempt, started, None))
            return result
        assert last is not None
        raise last

    def _record(self, attempt: Attempt, started: float, err: ApiError | None) -> AttemptRecord:
        conn = attempt.target.connection
        return AttemptRecord(
            position=attempt.position,
            model=attempt.target.model_id,
            connection=conn.id,
            provider=conn.provider,
            outcome="served" if err is None else err.type,
            latency_ms=round((self._clock() - started) * 1000, 3),
            code=None if err is None else err.code,
            message=None if err is None else err.message,
        )

    async def _send(self, req: ChatRequest, attempt: Attempt) -> UpstreamResponse:
        target = attempt.target
        adapter = self._registry.adapter(target.connection.provider)
        upstream = adapter.build_request(req, target)
        resp = await self._transport.send(upstream, target.connection.timeouts)
        if resp.status >= 300:
            try:
                body = await resp.read_body(self._error_body_bytes)
            finally:
                resp.close()
            raise adapter.parse_error(resp.status, resp.headers, body)
        return resp

    async def _open_stream(self, req: ChatRequest, attempt: Attempt) -> OpenedStream:
        resp = await self._send(req, attempt)
        translator = self._registry.adapter(attempt.target.connection.provider).stream(req)
        held: ChunkBatch = []
        try:
            while True:
                data = await resp.read_chunk()
                if not data:
                    held.extend(translator.finish())
                    return OpenedStream(attempt, resp, translator, held, ended=True)
                batch = translator.feed(data)
                held.extend(batch)
                if _has_event(batch):
                    return OpenedStream(attempt, resp, translator, held, ended=False)
                if translator.failure is not None:
                    raise translator.failure
        except BaseException:
            resp.close()
            raise

    async def _complete(self, req: ChatRequest, attempt: Attempt) -> Completed:
        resp = await self._send(req, attempt)
        adapter = self._registry.adapter(attempt.target.connection.provider)
        try:
            body = await resp.read_body(_MAX_COMPLETION_BYTES)
        except BaseException:
            resp.close()
            raise
        resp.release()
        if not body:
            raise UpstreamError("The provider sent an empty response.", code="upstream_empty")
        return Completed(attempt, adapter.parse_response(resp.status, resp.headers, body))
