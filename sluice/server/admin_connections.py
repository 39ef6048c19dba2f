"""``GET /admin/connections``: the config's connections as an operator watches them:
breaker state now (and which models' circuits are not closed, for how long), and since
this process started, upstream attempts, the share that failed, and the mean time to
first token of the requests each one served.

The figures are this replica's (read from its metrics registry when asked, nothing
counted twice); the breaker state too, as each replica keeps its own breaker.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from sluice.exchange.heads import JSON
from sluice.server.admin import authorize

if TYPE_CHECKING:
    from sluice.routing.breaker import Breaker
    from sluice.server.call import Call
    from sluice.server.context import GatewayContext

CONNECTIONS_PATH = "/admin/connections"
_ENCODER = msgspec.json.Encoder()


class CircuitView(msgspec.Struct, kw_only=True):
    """One model's circuit on the connection that is not closed now."""

    model: str
    state: str
    """``open`` (skipped) or ``half_open`` (the next request is a probe)."""
    reopens_in_s: float
    """Seconds until an open circuit lets a probe through; 0 when half-open."""


class ConnectionView(msgspec.Struct, kw_only=True):
    id: str
    provider: str
    breaker: str
    """``closed``, ``half_open`` or ``open``."""
    requests: int
    """Upstream attempts made on it (a skipped one is not an attempt)."""
    failed: int
    error_rate: float | None
    """``failed / requests``; None before any."""
    mean_ttft_ms: float | None
    circuits: list[CircuitView]
    """Its models whose circuit is not closed: which, and for how long."""


class ConnectionList(msgspec.Struct, kw_only=True):
    object: str = "list"
    data: list[ConnectionView]


async def connections(gw: GatewayContext, call: Call) -> None:
    authorize(gw, call)
    services = gw.services
    now = services.clock()
    stats = services.metrics.by_connection()
    views = []
    for conn in gw.settings.connections:
        seen = stats.get(conn.id)
        attempts, failed = (seen.attempts, seen.failed) if seen else (0, 0)
        views.append(
            ConnectionView(
                id=conn.id,
                provider=conn.provider,
                breaker=services.router.breaker.connection_state(conn.id, now).value,
                requests=attempts,
                failed=failed,
                error_rate=failed / attempts if attempts else None,
                mean_ttft_ms=seen.mean_ttft_ms if seen else None,
                circuits=_circuits(services.router.breaker, conn.id, now),
            )
        )
    body = _ENCODER.encode(ConnectionList(data=views))
    await call.writer.send(200, [*call.headers, JSON], body)


def _circuits(breaker: Breaker, connection: str, now: float) -> list[CircuitView]:
    return [
        CircuitView(
            model=model,
            state=state.value,
            reopens_in_s=round(breaker.reopens_in((conn, model), now), 1),
        )
        for (conn, model), state in sorted(breaker.states(now).items())
        if conn == connection and state.value != "closed"
    ]
