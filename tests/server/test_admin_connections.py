"""``GET /admin/connections``: each configured connection with its breaker state now,
its attempts and failures, and the mean time to first token it served, for the console's
operator view; the admin key only."""

from __future__ import annotations

import json
from pathlib import Path

from tests.server.test_admin import ADMIN, ENV
from tests.server.test_metrics_mix import fleet, streamed_body
from tests.support.accounts import metered_key
from tests.support.fake_openai import text_stream
from tests.support.fake_upstream import FakeUpstream, Reply
from tests.support.gateway import running_gateway
from tests.support.raw_http import exchange, get, post


async def test_connections_show_breaker_failures_and_ttft(tmp_path: Path) -> None:
    a, b = FakeUpstream(), FakeUpstream()
    await a.start()
    await b.start()
    a.default = Reply.json({"error": {"message": "down"}}, status=502)
    b.default = Reply.stream(*text_stream("from", " b"))
    try:
        async with running_gateway(tmp_path, fleet(a, b), env=ENV) as gw:
            key = await metered_key(gw.gateway.store, "team", 10**9)
            ids = []
            for _ in range(3):  # conn_a fails twice and opens; the third skips it
                path = "/v1/chat/completions"
                answer = await exchange(gw.host, gw.port, post(path, streamed_body("bot"), key))
                assert answer.status == 200
                ids.append(answer.headers["x-request-id"])
            listed = await exchange(gw.host, gw.port, get("/admin/connections", ADMIN))
            routing = await exchange(gw.host, gw.port, get("/admin/models", ADMIN))
            refused_models = await exchange(gw.host, gw.port, get("/admin/models", key))
            refused = await exchange(gw.host, gw.port, get("/admin/connections", key))
            rows = [
                (await exchange(gw.host, gw.port, get(f"/v1/requests/{i}", key))).json()
                for i in ids
            ]
    finally:
        await a.close()
        await b.close()
    assert listed.status == 200, listed.body
    views = {view["id"]: view for view in json.loads(listed.body)["data"]}
    (circuit,) = views["conn_a"].pop("circuits")  # which model, and for how long
    assert circuit["model"] == "test/a" and circuit["state"] == "open"
    assert 55 < circuit["reopens_in_s"] <= 60  # breaker_cooldown = 60
    assert views["conn_a"] | {"mean_ttft_ms": None} == {
        "id": "conn_a",
        "provider": "openai-compatible",
        "breaker": "open",
        "requests": 2,
        "failed": 2,
        "error_rate": 1.0,
        "mean_ttft_ms": None,
    }
    served = views["conn_b"]
    assert (served["breaker"], served["requests"], served["failed"]) == ("closed", 3, 0)
    mean = sum(r["ttft_ms"] for r in rows) / 3
    assert abs(served["mean_ttft_ms"] - mean) < 0.01
    assert refused.status == 401 and refused_models.status == 401
    assert views["conn_b"]["circuits"] == []
    shown = {view["id"]: view for view in routing.json()["data"]}
    assert shown["test/a"]["kind"] == "model"
    assert shown["test/a"]["pricing"] == {"input": 2.0, "output": 8.0}
    targets = [(t["position"], t["model"], t["connection"], t["native"], t["breaker"])
               for t in shown["bot"]["targets"]]  # fmt: skip
    assert shown["bot"]["kind"] == "route" and targets == [
        ("primary", "test/a", "conn_a", "model-a", "open"),
        ("standby_a", "test/b", "conn_b", "model-b", "closed"),
    ]
