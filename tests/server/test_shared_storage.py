"""On shared storage (PostgreSQL) a gateway mints no free traffic unless its file says
so (issue 20): no development account or key, no demo connection; ``[server] dev_key =
true`` and ``demo = true`` turn each on. A reload follows the storage in use."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from sluice.accounts.dev_key import DEV_ACCOUNT, DEV_KEY_FILE
from sluice.server.lifecycle import RunningGateway, free_traffic
from tests.support.accounts import metered_key
from tests.support.databases import fresh_postgres
from tests.support.gateway import running_gateway
from tests.support.raw_http import RawResponse, exchange, get, post

ADMIN = "admin-" + "s" * 40
ENV = {"SLUICE_ADMIN_KEY": ADMIN}
USD = 10**9
DEMO = json.dumps(
    {"model": "sluice/demo-fast", "max_tokens": 3, "messages": [{"role": "user", "content": "hi"}]}
).encode()


def on_postgres(dsn: str, server: str = "") -> str:
    return f'[server]\nport = 0\n{server}[storage]\nurl = "{dsn}"\n'


async def ask_demo(gw: RunningGateway, key: str) -> RawResponse:
    return await exchange(gw.host, gw.port, post("/v1/chat/completions", DEMO, key))


async def listed(gw: RunningGateway, key: str) -> list[str]:
    models = (await exchange(gw.host, gw.port, get("/v1/models", key))).json()
    return [m["id"] for m in models["data"]]


async def test_without_a_setting_postgres_gets_no_dev_key_and_no_demo(tmp_path: Path) -> None:
    async with fresh_postgres() as dsn, running_gateway(tmp_path, on_postgres(dsn)) as gw:
        store = gw.gateway.store
        key = await metered_key(store, "team", 10 * USD)
        demo = await ask_demo(gw, key)
        models = await listed(gw, key)
        dev_account = await store.get_account(DEV_ACCOUNT)
        settings = gw.gateway.settings
    assert gw.dev_key is None and dev_account is None
    assert not (tmp_path / DEV_KEY_FILE).exists()
    assert (settings.server.dev_key, settings.server.demo) == (False, False)
    assert [c.provider for c in settings.connections] == []
    assert demo.status == 404 and demo.json()["error"]["code"] == "model_not_served"
    assert "sluice/demo-fast" not in models
    assert free_traffic(settings) == (
        "dev key off, demo off (shared storage: [server] dev_key = true / demo = true "
        "turns them on)"
    )


async def test_true_turns_each_on_on_postgres(tmp_path: Path) -> None:
    async with fresh_postgres() as dsn:
        server = "dev_key = true\ndemo = true\n"
        async with running_gateway(tmp_path / "both", on_postgres(dsn, server)) as gw:
            assert gw.dev_key is not None
            demo = await ask_demo(gw, gw.dev_key.key)
            dev_account = await gw.gateway.store.get_account(DEV_ACCOUNT)
            both = free_traffic(gw.gateway.settings)
        async with running_gateway(tmp_path / "demo", on_postgres(dsn, "demo = true\n")) as gw:
            demo_only = free_traffic(gw.gateway.settings)
            no_dev_key = gw.dev_key
    assert demo.status == 200, demo.body
    assert dev_account is not None and not dev_account.metered
    assert both == "dev key on, demo on"
    assert no_dev_key is None
    assert demo_only == "dev key off, demo on (shared storage: [server] dev_key = true turns it on)"


async def test_a_replica_without_the_setting_refuses_a_dev_key_already_in_the_database(
    tmp_path: Path,
) -> None:
    """A development key an earlier start minted into the shared database stops working
    on every replica that does not turn it on."""
    async with fresh_postgres() as dsn:
        server = "dev_key = true\ndemo = true\n"
        async with running_gateway(tmp_path / "a", on_postgres(dsn, server)) as gw:
            assert gw.dev_key is not None
            minted = gw.dev_key.key
        async with running_gateway(tmp_path / "b", on_postgres(dsn)) as gw:
            refused = await exchange(gw.host, gw.port, get("/v1/models", minted))
    assert refused.status == 401


async def test_a_reload_follows_the_storage_in_use_and_the_dev_key_waits_for_a_restart(
    tmp_path: Path,
) -> None:
    path = tmp_path / "sluice.toml"
    async with (
        fresh_postgres() as dsn,
        running_gateway(tmp_path, on_postgres(dsn), env=ENV, config_path=path) as gw,
    ):
        key = await metered_key(gw.gateway.store, "team", 10 * USD)
        # the file now names SQLite, where both would be on: a storage change waits for
        # a restart, so the defaults stay those of PostgreSQL, the storage in use
        await asyncio.to_thread(path.write_text, "[server]\nport = 0\n")
        to_sqlite = await reload(gw)
        demo_after_sqlite = await ask_demo(gw, key)
        await asyncio.to_thread(path.write_text, on_postgres(dsn, "dev_key = true\ndemo = true\n"))
        turned_on = await reload(gw)
        demo_after_true = await ask_demo(gw, key)
        running = gw.gateway.settings.server
    assert to_sqlite.status == 200, to_sqlite.body
    assert to_sqlite.json()["needs_restart"] == ["[storage] url"]
    assert to_sqlite.json()["connections"] == []
    assert demo_after_sqlite.status == 404
    assert turned_on.status == 200
    assert turned_on.json()["needs_restart"] == ["[server] dev_key"]
    assert turned_on.json()["connections"] == ["conn_demo"]
    assert demo_after_true.status == 200  # the demo is hot; the dev key is not minted
    assert (running.demo, running.dev_key, gw.dev_key) == (True, False, None)


async def reload(gw: RunningGateway) -> RawResponse:
    request = (
        "POST /admin/reload HTTP/1.1\r\nHost: x\r\n"
        f"Authorization: Bearer {ADMIN}\r\nContent-Length: 0\r\n\r\n"
    )
    return await exchange(gw.host, gw.port, request.encode())
