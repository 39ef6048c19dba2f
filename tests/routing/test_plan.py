from __future__ import annotations

import pytest

from sluice.config import ModelConfig, RouteConfig, RouteTargetConfig
from sluice.core.connection import ConnectionSettings, Timeouts
from sluice.errors import ConfigError, ModelNotFoundError
from sluice.routing.catalog import Catalog
from sluice.routing.plan import Planner, position_name


def conn(id_: str, kind: str) -> ConnectionSettings:
    return ConnectionSettings(id_, kind, "http://x", timeouts=Timeouts())


MODELS = [
    ModelConfig("a/one", {"openai": "one", "deepseek": "one-ds"}, fallbacks=["a/three"]),
    ModelConfig("a/two", {"conn_b": "two-b"}),
    ModelConfig("a/three", {"deepseek": "three"}),
    ModelConfig("a/orphan", {"gemini": "x"}),
]
CONNS = [conn("conn_a", "openai"), conn("conn_b", "openai"), conn("conn_d", "deepseek")]
ROUTES = [
    RouteConfig("support-bot", [RouteTargetConfig("a/two"), RouteTargetConfig("a/one", "conn_d")])
]


def planner() -> Planner:
    return Planner(Catalog(MODELS), CONNS, ROUTES)


def summary(model: str, extra: tuple[str, ...] = ()) -> list[tuple[str, str, str, str]]:
    plan = planner().plan(model, extra)
    return [
        (a.position, a.target.model_id, a.target.connection.id, a.target.native_model)
        for a in plan.attempts
    ]


def test_position_names() -> None:
    assert [position_name(i) for i in (0, 1, 2, 26, 27)] == [
        "primary",
        "standby_a",
        "standby_b",
        "standby_z",
        "standby_aa",
    ]


def test_model_id_every_connection_in_order_then_fallbacks() -> None:
    assert summary("a/one") == [
        ("primary", "a/one", "conn_a", "one"),
        ("primary", "a/one", "conn_b", "one"),
        ("primary", "a/one", "conn_d", "one-ds"),
        ("standby_a", "a/three", "conn_d", "three"),
    ]
    assert planner().plan("a/one").route_name is None


def test_route_chain_then_request_models_then_fallbacks() -> None:
    plan = planner().plan("support-bot", ("a/three",))
    assert plan.route_name == "support-bot"
    assert [(a.position, a.target.model_id, a.target.connection.id) for a in plan.attempts] == [
        ("primary", "a/two", "conn_b"),
        ("standby_a", "a/one", "conn_d"),
        ("standby_b", "a/three", "conn_d"),
    ]


def test_connection_id_keys_pin_a_model_to_one_connection() -> None:
    assert summary("a/two") == [("primary", "a/two", "conn_b", "two-b")]


def test_unknown_and_unserved_models() -> None:
    with pytest.raises(ModelNotFoundError) as info:
        planner().plan("x/y")
    assert (info.value.param, info.value.code) == ("model", "model_not_found")
    with pytest.raises(ModelNotFoundError) as info:
        planner().plan("a/orphan")
    assert info.value.code == "model_not_served"
    with pytest.raises(ModelNotFoundError) as info:
        planner().plan("a/one", ("a/two", "x/y"))
    assert info.value.param == "models[1]"


@pytest.mark.parametrize(
    ("routes", "message"),
    [
        ([RouteConfig("r", [])], "empty chain"),
        ([RouteConfig("r", [RouteTargetConfig("x/y")])], "unknown model"),
        ([RouteConfig("r", [RouteTargetConfig("a/one", "conn_zz")])], "unknown connection"),
        ([RouteConfig("a/one", [RouteTargetConfig("a/two")])], "same name as a model"),
    ],
)
def test_bad_routes(routes: list[RouteConfig], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Planner(Catalog(MODELS), CONNS, routes)


def test_unknown_fallback_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="unknown fallback"):
        Catalog([ModelConfig("m", {"openai": "m"}, fallbacks=["nope"])])


def test_builtin_catalog_loads_and_config_overrides_it() -> None:
    catalog = Catalog.with_overrides([ModelConfig("openai/gpt-4o", {"openai": "gpt-4o-x"})])
    entry = catalog.get("openai/gpt-4o")
    assert entry is not None and entry.providers == {"openai": "gpt-4o-x"}
    assert entry.price is None
    demo = catalog.get("sluice/demo")
    assert demo is not None and demo.price is not None
