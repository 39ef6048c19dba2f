"""Stored responses through the official openai SDK, over real sockets: ``store``
keeps a response and its input items; ``retrieve``, ``input_items.list`` (paged as
OpenAI pages), ``delete``; ``previous_response_id`` continues a conversation across
three turns, the second on another provider than the first, with a tool call's output
answered in a later turn; another account's response is a 404 and a
``previous_response_id`` it does not own a 400, nothing stored or charged."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from openai import AsyncOpenAI, BadRequestError, NotFoundError

from sluice.server.lifecycle import RunningGateway
from tests.server.test_anthropic_gateway import config as anthropic_toml
from tests.support import fake_anthropic as fa
from tests.support.accounts import metered_key
from tests.support.fake_openai import completion
from tests.support.fake_upstream import FakeUpstream, Reply
from tests.support.gateway import openai_connection_toml, running_gateway

WEATHER: Any = {
    "type": "function",
    "name": "get_weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}


def sdk(gw: RunningGateway, key: str | None = None) -> AsyncOpenAI:
    assert gw.dev_key is not None
    return AsyncOpenAI(base_url=gw.base_url + "/v1", api_key=key or gw.dev_key.key, max_retries=0)


def openai_text(text: str) -> Reply:
    usage = {"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11}
    return Reply.json(completion(text, usage=usage))


def openai_call(call_id: str, name: str, arguments: str) -> Reply:
    call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
    return Reply.json(completion(None, tool_calls=[call], finish="tool_calls"))


def anthropic_text(text: str) -> Reply:
    return Reply.json(fa.whole_message({"type": "text", "text": text}))


async def test_a_stored_response_is_retrieved_listed_and_deleted(tmp_path: Path) -> None:
    async with running_gateway(tmp_path) as gw, sdk(gw) as client:
        made = await client.responses.create(
            model="sluice/demo",
            instructions="Be brief.",
            input=[
                {"role": "user", "content": "Hello"},
                {"role": "assistant", "content": "Hi!"},
                {
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": "More"}],
                },
            ],
            metadata={"ticket": "t-1"},
        )
        assert made.model_dump()["store"] is True
        again = await client.responses.retrieve(made.id)
        assert again.model_dump() == made.model_dump()
        items: Any = await client.responses.input_items.list(made.id)
        listed = [(i.type, i.role, i.content[0].type, i.content[0].text) for i in items.data]
        assert listed == [  # newest first, string content as one text part
            ("message", "user", "input_text", "More"),
            ("message", "assistant", "output_text", "Hi!"),
            ("message", "user", "input_text", "Hello"),
        ]
        assert len({i.id for i in items.data}) == 3
        assert items.first_id == items.data[0].id and items.last_id == items.data[-1].id
        assert items.has_more is False
        page: Any = await client.responses.input_items.list(made.id, limit=1, order="asc")
        assert [i.content[0].text for i in page.data] == ["Hello"] and page.has_more
        rest: Any = await client.responses.input_items.list(
            made.id, order="asc", after=page.last_id
        )
        assert [i.content[0].text for i in rest.data] == ["Hi!", "More"]
        assert not rest.has_more
        await client.responses.delete(made.id)  # the body is checked below
        with pytest.raises(NotFoundError):
            await client.responses.retrieve(made.id)
        with pytest.raises(NotFoundError):
            await client.responses.input_items.list(made.id)


async def test_the_delete_answer_and_the_404_are_openais_shape(tmp_path: Path) -> None:
    async with running_gateway(tmp_path) as gw, sdk(gw) as client:
        made = await client.responses.create(model="sluice/demo", input="Hello")
        answer = await client.delete(f"/responses/{made.id}", cast_to=object)
        assert answer == {"id": made.id, "object": "response.deleted", "deleted": True}
        with pytest.raises(NotFoundError) as missing:
            await client.delete(f"/responses/{made.id}", cast_to=object)
    body: Any = missing.value.body
    assert body["code"] == "response_not_found" and made.id in body["message"]


async def test_store_false_keeps_nothing(tmp_path: Path) -> None:
    async with running_gateway(tmp_path) as gw, sdk(gw) as client:
        made = await client.responses.create(model="sluice/demo", input="Hello", store=False)
        assert made.model_dump()["store"] is False
        with pytest.raises(NotFoundError):
            await client.responses.retrieve(made.id)
        with pytest.raises(BadRequestError) as refused:
            await client.responses.create(
                model="sluice/demo", input="Again", previous_response_id=made.id
            )
    assert refused.value.code == "previous_response_not_found"


async def test_a_streamed_response_is_stored_by_the_time_it_completed(tmp_path: Path) -> None:
    async with running_gateway(tmp_path) as gw, sdk(gw) as client:
        async with client.responses.stream(model="sluice/demo", input="Hello") as stream:
            final = await stream.get_final_response()
        again = await client.responses.retrieve(final.id)  # no wait: the write is awaited
    assert again.output_text == final.output_text and again.status == "completed"
    assert again.usage is not None and final.usage is not None
    assert again.usage.total_tokens == final.usage.total_tokens


async def test_three_turns_continue_across_providers_with_a_tool_call(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    claude = FakeUpstream()
    await claude.start()
    try:
        config = openai_connection_toml(fake.base_url) + anthropic_toml(claude)
        fake.queue(openai_call("call_1", "get_weather", '{"city":"Oslo"}'))
        claude.queue(anthropic_text("Oslo is 4 degrees."))
        fake.queue(openai_text("You asked about Oslo."))
        async with running_gateway(tmp_path, config) as gw, sdk(gw) as client:
            first = await client.responses.create(
                model="test/gpt-fake", input="Weather in Oslo?", tools=[WEATHER]
            )
            call: Any = first.output[0]
            assert call.type == "function_call" and call.call_id == "call_1"
            second = await client.responses.create(
                model="test/claude",
                previous_response_id=first.id,
                input=[{"type": "function_call_output", "call_id": "call_1", "output": "4 C"}],
                tools=[WEATHER],
            )
            third = await client.responses.create(
                model="test/gpt-fake",
                previous_response_id=second.id,
                input="Which city did I ask about?",
                instructions="Answer in one line.",
            )
            items: Any = await client.responses.input_items.list(third.id, order="asc")
    finally:
        await claude.close()
    assert second.output_text == "Oslo is 4 degrees."
    assert second.previous_response_id == first.id
    assert third.output_text == "You asked about Oslo."
    sent_to_claude = claude.requests[0].json()["messages"]
    first_turn = {"role": "user", "content": [{"type": "text", "text": "Weather in Oslo?"}]}
    assert sent_to_claude[0] == first_turn
    assert sent_to_claude[1]["content"][0]["type"] == "tool_use"
    assert sent_to_claude[1]["content"][0]["id"] == "call_1"
    assert sent_to_claude[2]["content"][0]["type"] == "tool_result"
    last = fake.requests[1].json()["messages"]
    assert [m["role"] for m in last] == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert last[0]["content"] == "Answer in one line."  # this turn's instructions only
    assert last[4]["content"] == "Oslo is 4 degrees."
    assert [i.type for i in items.data] == [
        "message",
        "function_call",
        "function_call_output",
        "message",
        "message",
    ]


async def test_another_accounts_response_is_not_found(tmp_path: Path) -> None:
    async with running_gateway(tmp_path) as gw:
        other = await metered_key(gw.gateway.store, "other", 10**12)
        async with sdk(gw) as mine, sdk(gw, other) as theirs:
            made = await mine.responses.create(model="sluice/demo", input="Secret plans")
            with pytest.raises(NotFoundError):
                await theirs.responses.retrieve(made.id)
            with pytest.raises(NotFoundError):
                await theirs.responses.input_items.list(made.id)
            with pytest.raises(NotFoundError):
                await theirs.responses.delete(made.id)
            with pytest.raises(BadRequestError) as refused:
                await theirs.responses.create(
                    model="sluice/demo", input="And?", previous_response_id=made.id
                )
            still = await mine.responses.retrieve(made.id)
        account = await gw.gateway.store.get_account("other")
    assert refused.value.code == "previous_response_not_found"
    assert refused.value.param == "previous_response_id"
    assert still.id == made.id
    assert account is not None and account.balance == 10**12 and account.held == 0


async def test_a_tool_output_without_its_call_anywhere_is_refused(tmp_path: Path) -> None:
    async with running_gateway(tmp_path) as gw, sdk(gw) as client:
        made = await client.responses.create(model="sluice/demo", input="Hello")
        with pytest.raises(BadRequestError) as refused:
            await client.responses.create(
                model="sluice/demo",
                previous_response_id=made.id,
                input=[{"type": "function_call_output", "call_id": "call_nope", "output": "x"}],
            )
    assert refused.value.code == "invalid_value"
    assert "call_nope" in str(refused.value.message)


@pytest.mark.parametrize(
    ("query", "param"),
    [
        ("limit=0", "limit"),
        ("limit=101", "limit"),
        ("limit=%C2%B2", "limit"),  # a superscript two: a digit to str.isdigit, not to int
        ("order=up", "order"),
        ("after=x", "after"),
    ],
)
async def test_bad_item_paging_is_a_400_naming_it(tmp_path: Path, query: str, param: str) -> None:
    async with running_gateway(tmp_path) as gw, sdk(gw) as client:
        made = await client.responses.create(model="sluice/demo", input="Hello")
        with pytest.raises(BadRequestError) as refused:
            await client.get(f"/responses/{made.id}/input_items?{query}", cast_to=object)
    assert refused.value.param == param


async def test_the_request_log_row_names_the_request_that_answered(tmp_path: Path) -> None:
    async with running_gateway(tmp_path) as gw, sdk(gw) as client:
        made = await client.responses.with_raw_response.create(model="sluice/demo", input="Hi")
        request_id = made.headers["x-request-id"]
        response = made.parse()
        row: Any = await client.get(f"/requests/{request_id}", cast_to=object)
    assert response.id == "resp_" + request_id.partition("_")[2]
    assert row["front_door"] == "responses" and row["stored_response"] == response.id
