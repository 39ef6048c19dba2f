"""A credit-metered account is not served for free: attempts on unpriced models are
left out of its plan, and a plan with nothing priced is a 400 (metering/charges.py)."""

from __future__ import annotations

import pytest

from sluice.config import ModelConfig, PriceConfig
from sluice.core.connection import ConnectionSettings
from sluice.core.usage import Price
from sluice.errors import InvalidRequestError
from sluice.metering.charges import UNPRICED, priced_plan
from sluice.routing.catalog import Catalog
from sluice.routing.plan import Plan, Planner

PRICED = PriceConfig(1.0, 2.0)
MODELS = [
    ModelConfig("t/free", {"x": "free"}, fallbacks=["t/paid"]),
    ModelConfig("t/paid", {"x": "paid"}, price=PRICED),
]


def plan(name: str, **conn: object) -> Plan:
    settings = ConnectionSettings("c", "x", "http://x", **conn)  # type: ignore[arg-type]
    return Planner(Catalog(MODELS), [settings], []).plan(name)


def models(p: Plan) -> list[str]:
    return [a.target.model_id for a in p.attempts]


def test_unpriced_attempts_are_left_out() -> None:
    assert models(priced_plan(plan("t/free"), {})) == ["t/paid"]
    paid = plan("t/paid")
    assert priced_plan(paid, {}) is paid


@pytest.mark.parametrize(
    ("conn", "prices"),
    [
        ({"allow_unpriced": True}, {}),
        ({"owner": "acct_1"}, {}),
        ({"prices": {"t/free": Price.per_million(1, 1)}}, {}),
        ({}, {"t/free": Price.per_million(1, 1)}),
    ],
    ids=["operator-allows", "accounts-own-connection", "connection-price", "account-price"],
)
def test_what_keeps_an_unpriced_model(conn: dict[str, object], prices: dict[str, Price]) -> None:
    assert models(priced_plan(plan("t/free", **conn), prices)) == ["t/free", "t/paid"]


def test_nothing_priced_is_a_400_naming_the_model_and_the_switch() -> None:
    lone = Planner(
        Catalog([ModelConfig("t/free", {"x": "free"})]),
        [ConnectionSettings("c", "x", "http://x")],
        [],
    ).plan("t/free")
    with pytest.raises(InvalidRequestError) as info:
        priced_plan(lone, {})
    err = info.value
    assert (err.http_status, err.code, err.param) == (400, UNPRICED, "model")
    assert "'t/free' has no price" in err.message and "allow_unpriced" in err.message
