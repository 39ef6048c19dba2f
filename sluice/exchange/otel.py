"""Tracing with the OpenTelemetry SDK (the ``telemetry`` extra), loaded only when
``[telemetry] otlp_endpoint`` is set.

Each gateway has its own tracer provider (never the process-global one), exporting
through a batch processor (a thread of the SDK's: the event loop never waits for the
collector), by default over OTLP/HTTP. A request's span starts with its exchange, a
child of the client's ``traceparent`` when it sent one; each try's span starts as the
try does, so the ``traceparent`` sent upstream names it. Their attributes are set
once, when the request settles, from the request-log row (:mod:`.spans`), and each
span ends at the time the row's latencies give: nothing runs per chunk.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Mapping

from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_ON, ParentBased
from opentelemetry.trace import (
    Span,
    SpanKind,
    Status,
    StatusCode,
    Tracer,
    get_current_span,
    set_span_in_context,
)
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from sluice import __version__
from sluice.exchange.spans import (
    OPERATION,
    Attributes,
    attempt_attributes,
    attempt_error,
    request_attributes,
    request_error,
    span_name,
    usage_attributes,
)
from sluice.exchange.state import ExchangeState
from sluice.routing.attempts import AttemptRecord
from sluice.settings import TelemetrySettings
from sluice.storage.base import RequestRecord

_TRACEPARENT = "traceparent"


class OtelTelemetry:
    """One gateway's tracing; :meth:`close` flushes and stops its exporter."""

    __slots__ = ("_propagator", "_provider", "_random", "_ratio", "_tracer")

    def __init__(self, settings: TelemetrySettings, exporter: SpanExporter | None = None) -> None:
        resource = Resource.create(
            {"service.name": settings.service_name, "service.version": __version__}
        )
        self._ratio = settings.sample_ratio
        self._random = random.Random()
        self._provider = TracerProvider(
            resource=resource, sampler=ParentBased(ALWAYS_ON), shutdown_on_exit=False
        )
        if exporter is None:
            exporter = OTLPSpanExporter(
                endpoint=settings.otlp_endpoint, timeout=settings.export_timeout
            )
        self._provider.add_span_processor(BatchSpanProcessor(exporter))
        self._tracer = self._provider.get_tracer("sluice", __version__)
        self._propagator = TraceContextTextMapPropagator()

    def start(self, model: str, incoming: Mapping[str, str]) -> OtelTrace | None:
        """A client's valid ``traceparent`` decides whether its request is recorded; a
        new trace is recorded with ``sample_ratio``'s probability, decided here, before
        the SDK is called, so a request not recorded costs a random draw and nothing
        more. A ``traceparent`` the W3C rules refuse (malformed, all-zero ids, version
        ``ff``) is ignored, as if absent: it cannot force a trace."""
        parent = self._parent(incoming)
        if parent is None:
            if self._ratio < 1 and self._random.random() >= self._ratio:
                return None
            parent = Context()
        span = self._tracer.start_span(
            span_name(model), context=parent, kind=SpanKind.SERVER, start_time=time.time_ns()
        )
        return OtelTrace(self._tracer, self._propagator, span)

    def _parent(self, incoming: Mapping[str, str]) -> Context | None:
        """The client's trace as a parent context; None without a valid one."""
        if _TRACEPARENT not in incoming:
            return None
        parent = self._propagator.extract(incoming)
        return parent if get_current_span(parent).get_span_context().is_valid else None

    async def close(self) -> None:
        """Exports what is queued (within the exporter's timeout), off the event loop."""
        await asyncio.to_thread(self._provider.shutdown)


class _Try:
    """A try's span, and where its record lands among the exchange's attempts."""

    __slots__ = ("index", "span", "started")

    def __init__(self, index: int, span: Span, started: int) -> None:
        self.index, self.span, self.started = index, span, started


class OtelTrace:
    """One request's spans (:class:`~.telemetry.RequestTrace`)."""

    __slots__ = ("_context", "_propagator", "_span", "_tracer", "_tries")

    def __init__(
        self, tracer: Tracer, propagator: TraceContextTextMapPropagator, span: Span
    ) -> None:
        self._tracer = tracer
        self._propagator = propagator
        self._span = span
        self._context = set_span_in_context(span)
        self._tries: list[_Try] = []

    def attempt(self, index: int) -> dict[str, str]:
        started = time.time_ns()
        span = self._tracer.start_span(
            OPERATION, context=self._context, kind=SpanKind.CLIENT, start_time=started
        )
        self._tries.append(_Try(index, span, started))
        headers: dict[str, str] = {}
        self._propagator.inject(headers, context=set_span_in_context(span))
        return headers

    def end(self, record: RequestRecord, state: ExchangeState) -> None:
        if not self._span.is_recording():  # a client's unsampled trace: nothing to export
            return
        now = time.time_ns()
        urls = _base_urls(state)
        for one in self._tries:
            found = state.attempts[one.index] if one.index < len(state.attempts) else None
            if found is None:
                _end_cancelled(one, now)
            else:
                _end_try(one, found, record, urls.get(found.connection), now)
        span = self._span
        span.set_attributes(request_attributes(record, state.req))
        _set_status(span, request_error(record), record.error_type)
        span.end(end_time=now)


def _base_urls(state: ExchangeState) -> dict[str, str]:
    """Each planned connection's base URL, by id (for ``server.address``)."""
    if state.plan is None:
        return {}
    return {a.target.connection.id: a.target.connection.base_url for a in state.plan.attempts}


def _end_try(
    one: _Try, attempt: AttemptRecord, record: RequestRecord, base_url: str | None, now: int
) -> None:
    """A try with its record: a failed one ended after its latency; the served one when
    its answer did (a stream's at the end, an answer read whole after its latency)."""
    span = one.span
    attrs: Attributes = attempt_attributes(attempt, base_url)
    served = attempt.outcome == "served"
    if served:
        attrs.update(usage_attributes(record))
    span.update_name(span_name(attempt.model))
    span.set_attributes(attrs)
    error = attempt_error(attempt)
    _set_status(span, error, attempt.outcome)
    ended = now if served and record.stream else one.started + int(attempt.latency_ms * 1e6)
    span.end(end_time=min(max(ended, one.started), now))


def _end_cancelled(one: _Try, now: int) -> None:
    """A try cut before it had a record (the client left, or the gateway stopped)."""
    one.span.set_attribute("sluice.attempt.outcome", "cancelled")
    one.span.end(end_time=now)


def _set_status(span: Span, error: str | None, description: str | None) -> None:
    """Error status (with ``error.type`` set by the caller) when ``error``; the
    description is the error's type, never its message."""
    if error is not None:
        span.set_status(Status(StatusCode.ERROR, description or error))
