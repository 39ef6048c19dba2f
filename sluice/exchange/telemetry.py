"""Tracing's seam: what an exchange asks of it, and the no-op it holds when tracing is off.

``[telemetry] otlp_endpoint`` turns tracing on (docs/observability.md):
:func:`build_telemetry` then loads the OpenTelemetry SDK (the ``telemetry`` extra,
:mod:`.otel`), once, at composition. Without it every exchange holds
:data:`NO_TELEMETRY`, whose :meth:`~NoTelemetry.start` returns None: no tracer is
called, no header is added, and the hot path is the same either way (spans are
finished from the request-log row, once, when the request settles).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

from sluice.errors import ConfigError
from sluice.exchange.state import ExchangeState
from sluice.settings import TelemetrySettings
from sluice.storage.base import RequestRecord

if TYPE_CHECKING:
    from opentelemetry.sdk.trace.export import SpanExporter

EXTRA_HINT = "pip install 'sluice-gateway[telemetry]'"


class RequestTrace(Protocol):
    """One request's spans: started with its exchange, ended when it settles."""

    def attempt(self, index: int) -> Mapping[str, str]:
        """A try starts (its record will be ``state.attempts[index]``): its span starts
        now; returns the headers its upstream request carries (``traceparent``)."""
        ...

    def end(self, record: RequestRecord, state: ExchangeState) -> None:
        """The request settled: every span gets its attributes and ends."""
        ...


class Telemetry(Protocol):
    """Built once per gateway by the composition root, shared by every generation."""

    def start(self, model: str, incoming: Mapping[str, str]) -> RequestTrace | None:
        """A request starts (``incoming``: the client's headers, read for
        ``traceparent``); None when nothing traces."""
        ...

    async def close(self) -> None:
        """Export what is still queued, then stop (the gateway is closing)."""
        ...


class NoTelemetry:
    """Tracing off: nothing starts, nothing is exported."""

    __slots__ = ()

    def start(self, model: str, incoming: Mapping[str, str]) -> None:
        return None

    async def close(self) -> None:
        return None


NO_TELEMETRY = NoTelemetry()


def build_telemetry(
    settings: TelemetrySettings | None, exporter: SpanExporter | None = None
) -> Telemetry:
    """The gateway's tracing: the no-op unless ``settings`` is set. ``exporter``: where
    spans go (default: OTLP/HTTP to ``settings.otlp_endpoint``; tests pass an in-memory
    one). A :class:`ConfigError` naming the extra when the SDK is not installed."""
    if settings is None:
        return NO_TELEMETRY
    try:
        from sluice.exchange.otel import OtelTelemetry
    except ImportError as exc:
        if not (exc.name or "").startswith("opentelemetry"):
            raise
        raise ConfigError(
            "[telemetry] otlp_endpoint needs the OpenTelemetry SDK, which is not installed: "
            f"{EXTRA_HINT}"
        ) from None
    return OtelTelemetry(settings, exporter)
