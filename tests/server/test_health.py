"""``/health/live`` (the process answers) and ``/health/ready`` (storage and the rate
limiter answer, a config is loaded; 503 naming the part that does not)."""

from __future__ import annotations

from pathlib import Path

from tests.support.gateway import running_gateway
from tests.support.raw_http import exchange, get


async def test_live_and_ready_on_a_healthy_gateway(tmp_path: Path) -> None:
    async with running_gateway(tmp_path) as gw:
        live = await exchange(gw.host, gw.port, get("/health/live", None))
        ready = await exchange(gw.host, gw.port, get("/health/ready", None))
    assert live.status == 200 and live.json() == {"status": "ok"}
    assert ready.status == 200
    assert ready.json() == {
        "status": "ready",
        "checks": {"config": "ok", "storage": "ok", "limits": "ok"},
        "failing": [],
    }


async def test_a_rate_limiter_that_does_not_answer_is_not_ready(tmp_path: Path) -> None:
    config = '[limits]\nredis_url = "redis://127.0.0.1:1/0"\nkey = { requests = 5 }\n'
    async with running_gateway(tmp_path, config) as gw:
        ready = await exchange(gw.host, gw.port, get("/health/ready", None))
        live = await exchange(gw.host, gw.port, get("/health/live", None))
    doc = ready.json()
    assert ready.status == 503 and live.status == 200
    assert (doc["status"], doc["failing"], doc["checks"]["storage"]) == (
        "not_ready",
        ["limits"],
        "ok",
    )
    assert doc["checks"]["limits"].startswith("LimiterUnavailableError")


async def test_storage_that_does_not_answer_is_not_ready(tmp_path: Path) -> None:
    async with running_gateway(tmp_path) as gw:
        await gw.gateway.store.close()  # as if the database went away
        ready = await exchange(gw.host, gw.port, get("/health/ready", None))
    assert ready.status == 503 and ready.json()["failing"] == ["storage"]
