"""``GET /admin/cache`` (issue 26: the cache's sizes, evictions and hit ratio for the
operator), over real sockets against a fake upstream: before any request the ratio is
null and the store empty; after a miss, a hit and a bypass the counts, the ratio over
hits and misses only, the one entry and its bytes; the cached model and route listed
with their settings, an uncached model not; the admin key required."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sluice.server.lifecycle import RunningGateway
from tests.server.test_admin import ADMIN, ENV
from tests.server.test_cache import FUNDS, ask, fake
from tests.support.accounts import metered_key
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway import running_gateway
from tests.support.raw_http import exchange, get

ROUTE_CACHE = (
    '{ ttl = 60, scope = "global", replay = "paced", price_share = 0.25, '
    'semantic = { embedding_model = "sluice/demo-embed", threshold = 0.9 } }'
)


def config(fake: FakeUpstream) -> str:
    return (
        f'[[connections]]\nid = "conn_fake"\nprovider = "openai-compatible"\n'
        f'base_url = "{fake.base_url}"\n'
        '[[models]]\nid = "test/m"\nproviders = { conn_fake = "m" }\ncache = { ttl = 600 }\n'
        "price = { input = 1.0, output = 2.0 }\n"
        '[[models]]\nid = "test/plain"\nproviders = { conn_fake = "p" }\n'
        '[[routes]]\nname = "asked"\nchain = [ { model = "test/plain" } ]\n'
        f"cache = {ROUTE_CACHE}\n"
    )


__all__ = ["fake"]  # the fixture, with the cache tests' answer


async def cache_view(gw: RunningGateway, token: str = ADMIN) -> Any:
    return await exchange(gw.host, gw.port, get("/admin/cache", token))


async def test_a_miss_then_a_hit_is_half_the_lookups_and_one_entry(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    async with running_gateway(tmp_path, config(fake), env=ENV) as gw:
        before = (await cache_view(gw)).json()
        key = await metered_key(gw.gateway.store, "team", FUNDS)
        outcomes = [(await ask(gw, key)).headers["x-sluice-cache"] for _ in range(2)]
        bypass = await ask(gw, key, headers="Cache-Control: no-store\r\n")
        after = (await cache_view(gw)).json()
    assert outcomes == ["miss", "hit"] and bypass.headers["x-sluice-cache"] == "bypass"
    assert before["hit_ratio"] is None and before["store"]["entries"] == 0
    assert before["requests"] == {"hit": 0, "miss": 0, "bypass": 0}
    assert after["requests"] == {"hit": 1, "miss": 1, "bypass": 1}
    assert after["hit_ratio"] == 0.5
    store = after["store"]
    assert (store["kind"], store["entries"], store["evictions"]) == ("memory", 1, 0)
    assert 0 < store["bytes"] <= store["max_entry_bytes"] == 1024 * 1024
    assert store["max_bytes"] == 64 * 1024 * 1024
    assert (after["flights"], after["flight_joiners"]) == (0, 0)


async def test_the_cached_models_and_routes_are_listed_with_their_settings(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    async with running_gateway(tmp_path, config(fake), env=ENV) as gw:
        models = {m["id"]: m for m in (await cache_view(gw)).json()["models"]}
    assert "test/plain" not in models
    assert models["test/m"] == {
        "id": "test/m",
        "kind": "model",
        "cache": {
            "ttl": 600, "scope": "account", "replay": "instant", "price_share": 0.0,
            "semantic": None,
        },
    }  # fmt: skip
    route = models["asked"]
    assert route["kind"] == "route"
    assert route["cache"] == {
        "ttl": 60, "scope": "global", "replay": "paced", "price_share": 0.25,
        "semantic": {"embedding_model": "sluice/demo-embed", "threshold": 0.9, "tools": False},
    }  # fmt: skip


async def test_the_cache_view_needs_the_admin_key(tmp_path: Path, fake: FakeUpstream) -> None:
    async with running_gateway(tmp_path, config(fake), env=ENV) as gw:
        key = await metered_key(gw.gateway.store, "team", FUNDS)
        anonymous = await exchange(gw.host, gw.port, get("/admin/cache", None))
        with_api_key = await cache_view(gw, key)
    assert anonymous.status == 401, anonymous.body
    assert with_api_key.status == 401, with_api_key.body
