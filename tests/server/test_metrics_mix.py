"""``/metrics`` after a known mix of requests, parsed with prometheus_client's parser:
every new counter equals the mix exactly."""

from __future__ import annotations

import json
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from tests.server.test_admin import ADMIN, ENV
from tests.support.accounts import metered_key
from tests.support.gateway import running_gateway
from tests.support.raw_http import exchange, get, post

HI = [{"role": "user", "content": "hi"}]


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[sample.name, tuple(sorted(sample.labels.items()))] = sample.value
    return out


async def test_the_counters_equal_the_mix(tmp_path: Path) -> None:
    config = "[server]\nport = 0\n[limits]\nkey = { requests = 3 }\n"
    async with running_gateway(tmp_path, config, env=ENV) as gw:
        key = await metered_key(gw.gateway.store, "team", 10**9)
        poor = await metered_key(gw.gateway.store, "poor", 1)
        chat = json.dumps({"model": "sluice/demo", "max_tokens": 5, "messages": HI}).encode()
        streamed = json.dumps(
            {"model": "sluice/demo", "max_tokens": 5, "stream": True, "messages": HI}
        ).encode()
        messages = json.dumps({"model": "sluice/demo", "max_tokens": 5, "messages": HI}).encode()
        ids = []
        for path, body in (
            ("/v1/chat/completions", chat),
            ("/v1/chat/completions", streamed),
            ("/v1/messages", messages),
        ):
            answer = await exchange(gw.host, gw.port, post(path, body, key))
            assert answer.status == 200, answer.body
            ids.append(answer.headers["x-request-id"])
        limited = await exchange(gw.host, gw.port, post("/v1/chat/completions", chat, key))
        broke = await exchange(gw.host, gw.port, post("/v1/chat/completions", chat, poor))
        rows = [
            (await exchange(gw.host, gw.port, get(f"/v1/requests/{i}", key))).json() for i in ids
        ]
        text = (await exchange(gw.host, gw.port, get("/metrics", ADMIN))).body.decode()
    assert (limited.status, broke.status) == (429, 402)
    found = samples(text)
    demo = (("connection", "conn_demo"), ("model", "sluice/demo"), ("provider", "demo"))

    def served(door: str, outcome: str) -> float:
        labels = tuple(sorted((*demo, ("front_door", door), ("outcome", outcome))))
        return found.get(("sluice_model_requests_total", labels), 0.0)

    assert served("chat", "truncated") == 2 and served("messages", "truncated") == 1
    for kind, field in (("prompt", "prompt_tokens"), ("completion", "completion_tokens")):
        labels = (("kind", kind), ("model", "sluice/demo"))
        assert found["sluice_tokens_total", labels] == sum(r[field] for r in rows)
    cost = found["sluice_cost_usd_total", (("model", "sluice/demo"),)]
    assert abs(cost - sum(r["cost"] for r in rows)) < 1e-12
    assert found["sluice_refusals_total", (("reason", "rate_limit"),)] == 1
    assert found["sluice_refusals_total", (("reason", "budget"),)] == 1
    chat_count = tuple(sorted((*demo, ("front_door", "chat"))))
    assert found["sluice_request_duration_seconds_count", chat_count] == 2
    assert found["sluice_served_time_to_first_token_seconds_count", chat_count] == 2
    streamed_rates = sum(1 for r in rows if r["tokens_per_second"] is not None)
    rates = sum(v for (name, _), v in found.items() if name == "sluice_tokens_per_second_count")
    assert rates == streamed_rates == 1  # only the streamed answer has a rate
