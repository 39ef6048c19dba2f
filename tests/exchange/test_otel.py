"""Who decides whether a request is traced (``exchange/otel.py``): a client's valid
``traceparent`` (parent-based), else ``sample_ratio``. A ``traceparent`` the W3C rules
refuse is ignored, as if absent: it cannot force a trace past ``sample_ratio = 0``.
Spans end to end through a gateway: tests/server/test_telemetry.py."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from sluice.exchange.otel import OtelTelemetry
from sluice.settings import TelemetrySettings

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "00f067aa0ba902b7"
SAMPLED = f"00-{TRACE}-{PARENT}-01"

REFUSED = [
    "garbage",
    "",
    f"00-{'0' * 32}-{PARENT}-01",
    f"00-{TRACE}-{'0' * 16}-01",
    f"ff-{TRACE}-{PARENT}-01",
    f"00-{TRACE.upper()}-{PARENT}-01",
    f"00-{TRACE}-{PARENT}-01-extra",
    f"00-{TRACE}-{PARENT}",
    f"00-{TRACE}-{PARENT}-0g",
    f"0-{TRACE}-{PARENT}-01",
]
REFUSED_IDS = [
    "garbage",
    "empty",
    "zero-trace-id",
    "zero-parent-id",
    "version-ff",
    "upper-case-hex",
    "version-00-with-more",
    "no-flags",
    "bad-flags",
    "short-version",
]


def sampled(flags: str) -> bool:
    return bool(int(flags, 16) & 1)


async def tracing(sample_ratio: float) -> AsyncIterator[OtelTelemetry]:
    settings = TelemetrySettings("http://127.0.0.1:9/v1/traces", sample_ratio=sample_ratio)
    telemetry = OtelTelemetry(settings, InMemorySpanExporter())
    yield telemetry
    await telemetry.close()


@pytest.fixture
async def never() -> AsyncIterator[OtelTelemetry]:
    """Tracing with ``sample_ratio = 0``: only a client's sampled trace is recorded."""
    async for telemetry in tracing(0.0):
        yield telemetry


@pytest.fixture
async def always() -> AsyncIterator[OtelTelemetry]:
    async for telemetry in tracing(1.0):
        yield telemetry


@pytest.mark.parametrize("value", REFUSED, ids=REFUSED_IDS)
def test_a_refused_traceparent_does_not_force_a_trace(never: OtelTelemetry, value: str) -> None:
    assert never.start("m", {"traceparent": value, "tracestate": "vendor=1"}) is None


@pytest.mark.parametrize("value", REFUSED, ids=REFUSED_IDS)
def test_a_refused_traceparent_starts_a_trace_of_its_own(always: OtelTelemetry, value: str) -> None:
    trace = always.start("m", {"traceparent": value})
    assert trace is not None
    _, trace_id, _, flags = trace.attempt(0)["traceparent"].split("-")
    assert trace_id != TRACE and sampled(flags)


def test_a_valid_sampled_traceparent_is_still_traced(never: OtelTelemetry) -> None:
    trace = never.start("m", {"traceparent": SAMPLED})
    assert trace is not None
    _, trace_id, _, flags = trace.attempt(0)["traceparent"].split("-")
    assert trace_id == TRACE and sampled(flags)


def test_a_valid_unsampled_traceparent_is_followed_not_recorded(always: OtelTelemetry) -> None:
    trace = always.start("m", {"traceparent": SAMPLED[:-2] + "00"})
    assert trace is not None
    _, trace_id, _, flags = trace.attempt(0)["traceparent"].split("-")
    assert trace_id == TRACE and not sampled(flags)  # upstream is told: not sampled


def test_a_future_version_with_more_fields_is_a_parent(never: OtelTelemetry) -> None:
    """W3C: a version above 00 may carry more fields; its first four are read."""
    trace = never.start("m", {"traceparent": f"01-{TRACE}-{PARENT}-01-more"})
    assert trace is not None and trace.attempt(0)["traceparent"].split("-")[1] == TRACE
