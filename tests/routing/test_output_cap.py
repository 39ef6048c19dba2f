"""A request's output cap above its model's ``max_output_tokens`` is lowered to the
model's limit on the request sent there, each target to its own (issue 24: a
``max_tokens: 100000`` was forwarded unchanged, and held for)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from sluice.core.connection import Target
from sluice.routing.attempts import AttemptRecord
from sluice.routing.plan import Attempt, Plan
from tests.support.fake_transport import connection
from tests.support.routing import MODEL, failing, ok, request, setup

A, B = connection("a"), connection("b")


def capped_plan(*limits: int | None) -> Plan:
    """One attempt per limit, on connections a, b, …: a model each with that limit."""
    attempts = []
    for name, conn, limit in zip(("primary", "standby_a"), (A, B), limits, strict=False):
        model = msgspec.structs.replace(MODEL, id=f"test/m{name}", max_output_tokens=limit)
        attempts.append(Attempt(name, Target(model.id, f"native-{conn.id}", conn), model))
    return Plan(MODEL.id, None, tuple(attempts))


@pytest.mark.parametrize(
    ("asked", "limit", "sent"),
    [
        ({"max_tokens": 100_000}, 100, {"max_tokens": 100}),
        ({"max_completion_tokens": 100_000}, 100, {"max_completion_tokens": 100}),
        (
            {"max_tokens": 500, "max_completion_tokens": 300},
            400,
            {"max_tokens": 400, "max_completion_tokens": 300},
        ),
        ({"max_tokens": 50}, 100, {"max_tokens": 50}),
        ({"max_tokens": 100_000}, None, {"max_tokens": 100_000}),
        ({}, 100, {}),
    ],
    ids=["above", "completion-spelling", "both-spellings", "below", "no-limit", "none-asked"],
)
async def test_the_cap_sent_is_at_most_the_models(
    asked: dict[str, Any], limit: int | None, sent: dict[str, int]
) -> None:
    transport, _, router = setup({"a": [ok()]})
    stream = await router.open_stream(request(**asked), capped_plan(limit), [])
    stream.close()
    body = transport.sent[0].body
    assert {k: body[k] for k in ("max_tokens", "max_completion_tokens") if k in body} == sent


async def test_each_target_gets_its_own_models_limit() -> None:
    transport, _, router = setup({"a": [failing(503)], "b": [ok()]})
    records: list[AttemptRecord] = []
    stream = await router.open_stream(request(max_tokens=10_000), capped_plan(100, 2_000), records)
    stream.close()
    assert [(s.conn, s.body["max_tokens"]) for s in transport.sent] == [("a", 100), ("b", 2_000)]
