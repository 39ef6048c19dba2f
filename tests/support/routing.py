"""Plans, requests and a router over the fake transport, for unit tests of routing
and the exchange (no sockets): the real adapter registry, so the real OpenAI-compatible
adapter builds every request and translates every scripted stream."""

from __future__ import annotations

import json
from random import Random
from typing import Any

from sluice.core.connection import ConnectionSettings, Target
from sluice.core.usage import Price
from sluice.frontdoors.chat import decode_chat_request
from sluice.providers.registry import AdapterRegistry
from sluice.routing.attempts import AttemptRecord
from sluice.routing.breaker import Breaker
from sluice.routing.catalog import CatalogModel
from sluice.routing.plan import Attempt, Plan
from sluice.routing.router import Router
from sluice.wire.chat import ChatRequest
from tests.support.fake_openai import DONE, chunk
from tests.support.fake_transport import Answer, FakeClock, FakeTransport, ScriptedResponse

PRICE = Price.per_million(2.0, 8.0)
"""2,000,000 pico-USD per prompt token, 8,000,000 per completion token."""
MODEL = CatalogModel("test/m", {}, None, PRICE, (), None, "test")
ROLE = chunk(role="assistant", content="")
STREAM = [ROLE, chunk(content="Hi"), chunk(finish="stop"), DONE]
POSITIONS = ["primary", *(f"standby_{c}" for c in "abcdefgh")]


def plan(
    *conns: ConnectionSettings,
    positions: list[str] | None = None,
    model: CatalogModel = MODEL,
) -> Plan:
    """One attempt per connection, at ``positions`` (default: one position each)."""
    names = positions or POSITIONS
    attempts = tuple(
        Attempt(name, Target(model.id, f"native-{c.id}", c), model)
        for name, c in zip(names, conns, strict=False)
    )
    return Plan(model.id, None, attempts)


def request(*, stream: bool = True, n: int | None = None, **extra: Any) -> ChatRequest:
    doc: dict[str, Any] = {"model": MODEL.id, "messages": [{"role": "user", "content": "Hi"}]}
    if stream:
        doc["stream"] = True
    if n is not None:
        doc["n"] = n
    return decode_chat_request(json.dumps({**doc, **extra}).encode())


def make_router(
    transport: FakeTransport,
    clock: FakeClock,
    *,
    threshold: int = 3,
    cooldown: float = 30.0,
    body_bytes: int = 1 << 20,
    error_body_bytes: int = 1 << 16,
) -> Router:
    return Router(
        registry=AdapterRegistry(lambda prefix: f"{prefix}_1"),
        transport=transport,
        breaker=Breaker(threshold, cooldown, max_retry_after=300.0),
        clock=clock,
        rng=Random(0),
        error_body_bytes=error_body_bytes,
        body_bytes=body_bytes,
    )


def setup(
    answers: dict[str, list[Answer]], *, signing: tuple[str, ...] = (), **options: Any
) -> tuple[FakeTransport, FakeClock, Router]:
    clock = FakeClock()
    transport = FakeTransport(answers, clock=clock, signing=signing)
    return transport, clock, make_router(transport, clock, **options)


def ok() -> ScriptedResponse:
    """A short stream: the role chunk, ``Hi``, the finish, ``[DONE]``."""
    return ScriptedResponse(STREAM)


def failing(
    status: int, message: str = "boom", code: str | None = None, **headers: str
) -> ScriptedResponse:
    """An OpenAI error body with ``status``."""
    return ScriptedResponse.json({"error": {"message": message, "code": code}}, status, **headers)


def rows(records: list[AttemptRecord]) -> list[str]:
    """Each attempt as ``position connection outcome [code]``."""
    return [" ".join(filter(None, (r.position, r.connection, r.outcome, r.code))) for r in records]
