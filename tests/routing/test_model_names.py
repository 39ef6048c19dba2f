"""What a model name means to the planner: ids, aliases, pass-through ids, and the 404s
and 400s of the names that mean nothing or too much."""

from __future__ import annotations

import pytest

from sluice.config import ModelConfig, RouteConfig, RouteTargetConfig
from sluice.core.connection import ConnectionSettings
from sluice.errors import InvalidRequestError, ModelNotFoundError
from sluice.routing.catalog import Catalog, builtin_models
from sluice.routing.plan import MAX_KEPT_PLANS, Planner

MODELS = [
    ModelConfig("acme/big", {"conn_acme": "big-v2"}),
    ModelConfig("other/big", {"conn_other": "big"}),
    ModelConfig("acme/small", {"conn_acme": "small-v1", "conn_other": "small-v1"}),
    ModelConfig("acme/unserved", {"conn_none": "x"}),
]


def conn(
    id_: str, kind: str = "openai-compatible", *, passthrough: bool = False
) -> ConnectionSettings:
    return ConnectionSettings(id_, kind, "http://x", passthrough=passthrough)


def planner(*conns: ConnectionSettings, routes: list[RouteConfig] | None = None) -> Planner:
    catalog = Catalog([*builtin_models(), *MODELS])
    return Planner(catalog, conns or (conn("conn_acme"), conn("conn_other")), routes or [])


def served(name: str, *conns: ConnectionSettings) -> list[tuple[str, str, str]]:
    plan = planner(*conns).plan(name)
    return [
        (a.target.model_id, a.target.connection.id, a.target.native_model) for a in plan.attempts
    ]


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("small", ("acme/small", "conn_acme", "small-v1")),  # the id's part after `/`
        ("small-v1", ("acme/small", "conn_acme", "small-v1")),  # a native name
        ("big-v2", ("acme/big", "conn_acme", "big-v2")),
    ],
    ids=["bare-id", "native-name", "native-name-of-one"],
)
def test_a_bare_name_resolves_to_the_one_id_it_names(
    name: str, expected: tuple[str, str, str]
) -> None:
    assert served(name)[0] == expected
    assert planner().plan(name).requested_model == name


def test_builtin_aliases() -> None:
    demo = conn("conn_demo", "demo")
    openai = conn("conn_openai", "openai")
    assert served("demo", demo) == [("sluice/demo", "conn_demo", "demo")]
    assert served("gpt-4o", openai) == [("openai/gpt-4o", "conn_openai", "gpt-4o")]
    claude = conn("conn_claude", "anthropic")
    assert served("claude-sonnet-4-5", claude)[0][0] == "anthropic/claude-sonnet-4-5"


def test_an_ambiguous_name_lists_its_candidates() -> None:
    with pytest.raises(InvalidRequestError) as info:
        planner().plan("big")
    assert (info.value.code, info.value.param) == ("model_ambiguous", "model")
    assert "acme/big, other/big" in info.value.message


def test_an_ambiguous_name_served_by_one_connection_means_that_one() -> None:
    assert served("big", conn("conn_other")) == [("other/big", "conn_other", "big")]


def test_an_ambiguous_name_in_models_names_its_position() -> None:
    with pytest.raises(InvalidRequestError) as info:
        planner().plan("acme/small", ("big",))
    assert info.value.param == "models[0]"


def test_a_route_name_wins_over_an_alias() -> None:
    route = RouteConfig("small", [RouteTargetConfig("acme/big")])
    plan = planner(conn("conn_acme"), routes=[route]).plan("small")
    assert plan.route_name == "small" and plan.attempts[0].target.model_id == "acme/big"


def test_an_unknown_model_names_the_closest_ids() -> None:
    with pytest.raises(ModelNotFoundError) as info:
        planner(conn("conn_openai", "openai")).plan("openai/gpt-5")
    err = info.value
    assert (err.code, err.param, err.http_status) == ("model_not_found", "model", 404)
    assert err.message.startswith("The model 'openai/gpt-5' does not exist")
    close = err.message.partition("Close ones: ")[2]
    assert "'openai/gpt-4o'" in close and close.count("'") <= 10


def test_an_unknown_bare_name_suggests_ids_not_aliases() -> None:
    with pytest.raises(ModelNotFoundError) as info:
        planner(conn("conn_openai", "openai")).plan("gpt-4o-mni")
    assert "'openai/gpt-4o-mini'" in info.value.message


def test_nothing_close_is_no_suggestion() -> None:
    with pytest.raises(ModelNotFoundError) as info:
        planner().plan("zzzzzzzzzzzzzzzzzzzz")
    assert "Close ones" not in info.value.message


@pytest.mark.parametrize(
    ("name", "hint"),
    [
        (
            "openai/gpt-4o",
            'set OPENAI_API_KEY or add a [[connections]] entry with provider = "openai"',
        ),
        ("gpt-4o", "set OPENAI_API_KEY"),
        ("anthropic/claude-haiku-4-5", "set ANTHROPIC_API_KEY"),
        ("anthropic/claude-haiku-4-5", "; or set AWS_BEARER_TOKEN_BEDROCK and AWS_REGION or"),
        ("sluice/demo", "set [server] demo = true"),
        ("acme/unserved", 'add the [[connections]] entry with id = "conn_none"'),
    ],
    ids=["key-variable", "alias", "other-provider", "region", "local", "connection-id"],
)
def test_a_known_model_nothing_serves_names_what_would(name: str, hint: str) -> None:
    with pytest.raises(ModelNotFoundError) as info:
        planner(conn("conn_acme")).plan(name)
    assert info.value.code == "model_not_served"
    assert hint in info.value.message


def test_a_passthrough_connection_serves_any_name_under_its_id_or_kind() -> None:
    vllm = conn("vllm", passthrough=True)
    assert served("vllm/meta-llama/Llama-3-8B", vllm) == [
        ("vllm/meta-llama/Llama-3-8B", "vllm", "meta-llama/Llama-3-8B")
    ]
    assert served("openai-compatible/x", vllm) == [("openai-compatible/x", "vllm", "x")]
    model = planner(vllm).plan("vllm/m").attempts[0].model
    assert (model.price, model.listed_price, model.passthrough, model.owned_by) == (
        None,
        None,
        True,
        "vllm",
    )


def test_passthrough_is_off_by_default_and_takes_a_name() -> None:
    for name, conns in (
        ("conn_acme/new", (conn("conn_acme"),)),
        ("vllm/", (conn("vllm", passthrough=True),)),
    ):
        with pytest.raises(ModelNotFoundError):
            planner(*conns).plan(name)


def test_a_catalog_id_is_served_from_the_catalog_even_on_a_passthrough_connection() -> None:
    openai = conn("conn_openai", "openai", passthrough=True)
    model = planner(openai).plan("openai/gpt-4o").attempts[0].model
    assert not model.passthrough and model.price is not None


def test_plans_kept_are_bounded() -> None:
    p = planner(conn("vllm", passthrough=True))
    for i in range(MAX_KEPT_PLANS + 10):
        p.plan(f"vllm/m{i}")
    assert p.plan("vllm/m1") is p.plan("vllm/m1")  # kept
    last = f"vllm/m{MAX_KEPT_PLANS + 5}"
    assert p.plan(last) is not p.plan(last)  # built again each time
