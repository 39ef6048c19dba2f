"""``GET /admin/models``: every model a connection serves and every route, each with the
targets a request for it tries in order (connection, the model as the provider names
it, whether it is a configured fallback) and each target's circuit breaker now, for
the console's operator view. Only the config's connections: accounts' own are theirs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import msgspec
from msgspec import UNSET, UnsetType

from sluice.exchange.heads import JSON
from sluice.routing.router import circuit_of
from sluice.server.admin import authorize
from sluice.server.models import model_entry
from sluice.wire.chunks import ModelPricing

if TYPE_CHECKING:
    from sluice.routing.breaker import Breaker
    from sluice.routing.plan import Plan
    from sluice.routing.speeds import Speeds
    from sluice.server.call import Call
    from sluice.server.context import GatewayContext

MODELS_PATH = "/admin/models"
_ENCODER = msgspec.json.Encoder()


class TargetView(msgspec.Struct, kw_only=True):
    position: str
    """``primary``, ``standby_a``…: targets of one position are one model on several
    connections."""
    model: str
    connection: str
    provider: str
    native: str
    """The model's name at the provider."""
    fallback: bool
    """A model's configured fallback, not named by the route."""
    breaker: str
    """The (connection, model) circuit: ``closed``, ``half_open`` or ``open``."""
    ttft_estimate_ms: float | None
    """The moving estimate of its time to first event (a ``fastest`` model's), if any."""
    tokens_per_second_estimate: float | None
    """The moving estimate of its output tokens per second (a ``fastest`` model's)."""


class ModelView(msgspec.Struct, kw_only=True):
    id: str
    kind: Literal["model", "route"]
    pricing: ModelPricing | None
    max_output_tokens: int | UnsetType = UNSET
    context_window: int | UnsetType = UNSET
    targets: list[TargetView]


class ModelViewList(msgspec.Struct, kw_only=True):
    object: str = "list"
    data: list[ModelView]


def _targets(plan: Plan, breaker: Breaker, speeds: Speeds, now: float) -> list[TargetView]:
    return [
        TargetView(
            position=a.position,
            model=a.target.model_id,
            connection=a.target.connection.id,
            provider=a.target.connection.provider,
            native=a.target.native_model,
            fallback=a.fallback,
            breaker=breaker.state(circuit_of(a), now).value,
            ttft_estimate_ms=_ms(speeds.estimate(circuit_of(a))),
            tokens_per_second_estimate=_rounded(speeds.rate(circuit_of(a))),
        )
        for a in plan.attempts
    ]


async def model_views(gw: GatewayContext, call: Call) -> None:
    authorize(gw, call)
    planner = gw.tenants.shared.planner
    breaker, now = gw.services.router.breaker, gw.services.clock()
    views = []
    names = [(m.id, "model") for m in gw.catalog if planner.servable(m)]
    names += [(r.name, "route") for r in gw.settings.routes]
    for name, kind in names:
        plan = planner.plan(name)
        entry = model_entry(plan.attempts[0].model)
        views.append(
            ModelView(
                id=name,
                kind="route" if kind == "route" else "model",
                pricing=entry.pricing,
                max_output_tokens=entry.max_output_tokens,
                context_window=entry.context_window,
                targets=_targets(plan, breaker, gw.services.router.speeds, now),
            )
        )
    body = _ENCODER.encode(ModelViewList(data=views))
    await call.writer.send(200, [*call.headers, JSON], body)


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 1)


def _rounded(rate: float | None) -> float | None:
    return None if rate is None else round(rate, 1)
