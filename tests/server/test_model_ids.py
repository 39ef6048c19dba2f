"""Model ids that just work, through a real gateway and the official openai SDK:
``GET /v1/models/{id}``, capabilities in the list, every path without ``/v1``, aliases,
the 404 of an unknown model, pass-through ids."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from openai import AsyncOpenAI, BadRequestError, NotFoundError, PermissionDeniedError
from openai.types.chat import ChatCompletionMessageParam

from sluice.core.principal import KeyPolicy
from sluice.server.lifecycle import RunningGateway
from tests.support.accounts import metered_key
from tests.support.fake_openai import completion, text_stream
from tests.support.fake_upstream import FakeUpstream, Reply
from tests.support.gateway import openai_connection_toml, running_gateway
from tests.support.raw_http import exchange, get, post

USER: list[ChatCompletionMessageParam] = [{"role": "user", "content": "Say hello"}]
DEMO = """
[[connections]]
id = "conn_demo"
provider = "demo"
options = { first_token_ms = 0, token_ms = 0 }
"""
ROUTE = '[[routes]]\nname = "support-bot"\nchain = [ { model = "test/gpt-fake" } ]\n'
USAGE = {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}


def sdk(gw: RunningGateway, base: str = "/v1") -> AsyncOpenAI:
    assert gw.dev_key is not None
    return AsyncOpenAI(base_url=gw.base_url + base, api_key=gw.dev_key.key, max_retries=0)


def key(gw: RunningGateway) -> str:
    assert gw.dev_key is not None
    return gw.dev_key.key


def extra(obj: Any) -> dict[str, Any]:
    return dict(obj.model_extra or {})


async def test_models_retrieve_answers_ids_with_slashes_routes_and_aliases(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    config = DEMO + openai_connection_toml(fake.base_url) + ROUTE
    async with running_gateway(tmp_path, config) as gw, sdk(gw) as client:
        demo = await client.models.retrieve("sluice/demo")  # sent as sluice%2Fdemo
        raw = await exchange(gw.host, gw.port, get("/v1/models/sluice/demo", key(gw)))
        route = await client.models.retrieve("support-bot")
        alias = await client.models.retrieve("demo-fast")
        listed = await client.models.list()
    assert (demo.id, demo.object, demo.owned_by) == ("sluice/demo", "model", "sluice")
    assert raw.status == 200 and raw.json() == demo.model_dump(exclude_none=True)
    assert extra(demo)["max_output_tokens"] == 4096
    assert extra(demo)["capabilities"] == {
        "chat": True,
        "tools": True,
        "vision": True,
        "json_schema": True,
        "reasoning": True,
        "embeddings": False,
    }
    assert (route.id, route.owned_by, extra(route)["pricing"]["input"]) == (
        "support-bot",
        "route",
        2.0,
    )
    assert alias.id == "sluice/demo-fast"
    assert {m.id: m.model_dump() for m in listed.data}["sluice/demo"] == demo.model_dump()


async def test_the_list_shows_what_each_model_can_do(tmp_path: Path) -> None:
    async with running_gateway(tmp_path, DEMO) as gw:
        resp = await exchange(gw.host, gw.port, get("/v1/models", key(gw)))
    entries = {e["id"]: e for e in resp.json()["data"]}
    embed = entries["sluice/demo-embed"]
    assert embed["dimensions"] == 256
    assert embed["capabilities"] == {"chat": False, "embeddings": True}
    assert embed["pricing"] == {"input": 0.02, "output": 0.0}
    assert "context_window" not in entries["sluice/demo"]


async def test_retrieving_an_unknown_model_is_404_naming_close_ones(tmp_path: Path) -> None:
    async with running_gateway(tmp_path, DEMO) as gw, sdk(gw) as client:
        with pytest.raises(NotFoundError) as unknown:
            await client.models.retrieve("sluice/demo-fats")
        with pytest.raises(NotFoundError) as unserved:
            await client.models.retrieve("openai/gpt-4o")
    assert unknown.value.code == "model_not_found"
    assert "Close ones: 'sluice/demo-fast'" in unknown.value.message
    assert unserved.value.code == "model_not_served"
    assert "set OPENAI_API_KEY" in unserved.value.message


async def test_a_key_sees_only_the_models_it_may_use(tmp_path: Path) -> None:
    async with running_gateway(tmp_path, DEMO) as gw:
        policy = KeyPolicy(models=("sluice/demo-*",))
        narrow = await metered_key(gw.gateway.store, "narrow", 10**9, policy)
        hidden = await exchange(gw.host, gw.port, get("/v1/models/sluice/demo", narrow))
        shown = await exchange(gw.host, gw.port, get("/v1/models/sluice%2Fdemo-fast", narrow))
    assert hidden.status == 404 and hidden.json()["error"]["code"] == "model_not_found"
    assert shown.status == 200


async def test_every_path_answers_without_v1(tmp_path: Path) -> None:
    async with running_gateway(tmp_path, DEMO) as gw, sdk(gw, base="") as client:
        answer = await client.chat.completions.with_raw_response.create(
            model="sluice/demo", messages=USER, max_tokens=3
        )
        listed = await client.models.list()
        one = await client.models.retrieve("sluice/demo")
        rid = answer.headers["x-request-id"]
        row = await exchange(gw.host, gw.port, get(f"/requests/{rid}", key(gw)))
        messages = json.dumps(
            {
                "model": "sluice/demo",
                "max_tokens": 3,
                "messages": [{"role": "user", "content": "hi"}],
            }
        ).encode()
        anthropic_wire = await exchange(gw.host, gw.port, post("/messages", messages, key(gw)))
        unknown = await exchange(gw.host, gw.port, get("/nothing", key(gw)))
    assert answer.parse().model == "sluice/demo"
    assert "sluice/demo" in [m.id for m in listed.data] and one.id == "sluice/demo"
    assert row.status == 200 and row.json()["front_door"] == "chat"
    assert anthropic_wire.status == 200 and anthropic_wire.json()["type"] == "message"
    assert unknown.status == 404 and unknown.json()["error"]["code"] == "unknown_url"


async def test_an_alias_is_served_as_the_catalog_id(tmp_path: Path) -> None:
    async with running_gateway(tmp_path, DEMO) as gw, sdk(gw) as client:
        answer = await client.chat.completions.with_raw_response.create(
            model="demo", messages=USER, max_tokens=3
        )
        rid = answer.headers["x-request-id"]
        row = await exchange(gw.host, gw.port, get(f"/v1/requests/{rid}", key(gw)))
    assert answer.parse().model == "sluice/demo"
    assert (row.json()["requested_model"], row.json()["served_model"]) == ("demo", "sluice/demo")


AMBIGUOUS = """
[[models]]
id = "acme/big"
providers = { conn_fake = "big-1" }

[[models]]
id = "other/big"
providers = { conn_fake = "big-2" }
"""


async def test_an_ambiguous_alias_lists_its_candidates(tmp_path: Path, fake: FakeUpstream) -> None:
    config = openai_connection_toml(fake.base_url) + AMBIGUOUS
    async with running_gateway(tmp_path, config) as gw, sdk(gw) as client:
        with pytest.raises(BadRequestError) as info:
            await client.chat.completions.create(model="big", messages=USER)
    assert info.value.code == "model_ambiguous"
    assert "acme/big, other/big" in info.value.message
    assert fake.requests == []


async def test_an_unknown_model_names_close_ids_and_what_would_serve_it(tmp_path: Path) -> None:
    async with running_gateway(tmp_path, DEMO) as gw, sdk(gw) as client:
        with pytest.raises(NotFoundError) as unknown:
            await client.chat.completions.create(model="sluice/dmeo", messages=USER)
        with pytest.raises(NotFoundError) as unserved:
            await client.chat.completions.create(model="gpt-4o", messages=USER)
    assert (unknown.value.code, extra_param(unknown.value)) == ("model_not_found", "model")
    assert "'sluice/demo'" in unknown.value.message
    assert unserved.value.code == "model_not_served"
    assert "set OPENAI_API_KEY or add a [[connections]] entry" in unserved.value.message


def extra_param(err: Any) -> str | None:
    body: dict[str, Any] = err.body
    return body.get("param")


PASSTHROUGH = """
[[connections]]
id = "vllm"
provider = "openai-compatible"
base_url = "{base}"
passthrough = true
prices = {{ "vllm/priced-model" = {{ input = 2.0, output = 8.0 }} }}
"""


async def test_a_passthrough_connection_serves_any_name_unpriced(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    fake.queue(Reply.stream(*text_stream("Hi", usage=USAGE)))
    fake.queue(Reply.json(completion("Hi", usage=USAGE)))
    async with (
        running_gateway(tmp_path, PASSTHROUGH.format(base=fake.base_url)) as gw,
        sdk(gw) as client,
    ):
        stream = await client.chat.completions.create(
            model="vllm/Qwen/Qwen3-8B",
            messages=USER,
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = [c async for c in stream]
        rid = chunks[0].id
        row = (await exchange(gw.host, gw.port, get(f"/v1/requests/{rid}", key(gw)))).json()
        priced = await client.chat.completions.create(model="vllm/priced-model", messages=USER)
        found = await client.models.retrieve("vllm/Qwen/Qwen3-8B")
    assert fake.requests[0].json()["model"] == "Qwen/Qwen3-8B"
    assert {c.model for c in chunks} == {"vllm/Qwen/Qwen3-8B"}
    usage = chunks[-1].usage
    assert usage is not None and usage.total_tokens == 12
    assert (extra(usage)["cost"], extra(usage)["price_source"]) == (None, None)
    assert (row["served_model"], row["cost"], row["price_source"]) == (
        "vllm/Qwen/Qwen3-8B",
        None,
        None,
    )
    assert priced.usage is not None
    assert extra(priced.usage)["price_source"] == "custom_provider"
    assert (found.id, found.owned_by, extra(found)["pricing"]) == (
        "vllm/Qwen/Qwen3-8B",
        "vllm",
        None,
    )


async def test_a_key_allowed_an_id_may_ask_for_it_by_its_alias(tmp_path: Path) -> None:
    policy = KeyPolicy(models=("sluice/demo",))
    async with running_gateway(tmp_path) as gw:
        key = await metered_key(gw.gateway.store, "team", 10**9, policy)
        async with AsyncOpenAI(base_url=gw.base_url + "/v1", api_key=key, max_retries=0) as c:
            by_alias = await c.chat.completions.create(
                model="demo", messages=[{"role": "user", "content": "hi"}], max_tokens=3
            )
            with pytest.raises(PermissionDeniedError) as refused:
                await c.chat.completions.create(
                    model="demo-fast", messages=[{"role": "user", "content": "hi"}]
                )
    assert by_alias.model == "sluice/demo"
    assert refused.value.code == "model_not_allowed"
