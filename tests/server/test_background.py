"""Background responses (issue 25, docs/responses.md#background-responses), read by the
official openai SDK over real sockets: ``background: true`` answers ``queued`` at once
and runs on without its client; ``retrieve`` polls it through ``in_progress`` to
``completed``; ``retrieve(stream=True, starting_after=N)`` picks its stream up after
sequence number N and the SDK's stream helper folds the whole of it; ``cancel`` stops
it, charged for what it made; a creator gone before the first event does not stop
it; a refusal at admission is an HTTP error and leaves nothing behind."""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path
from typing import Any

import pytest
from openai import AsyncOpenAI, BadRequestError, ConflictError, NotFoundError, RateLimitError

from sluice.server.lifecycle import RunningGateway
from tests.server.test_anthropic_gateway import config as anthropic_toml
from tests.server.test_messages_providers import recorded
from tests.server.test_responses_sdk import summary
from tests.server.test_wire_golden import PROVIDERS, _reply, aws_environment
from tests.support import fake_anthropic as anthropic
from tests.support.accounts import metered_key
from tests.support.fake_openai import text_stream
from tests.support.fake_upstream import Cut, FakeUpstream, Pause, Reply
from tests.support.gateway import openai_connection_toml, running_gateway
from tests.support.raw_http import RawClient, exchange, get, post
from tests.support.transcript import FIXTURES

__all__ = ["aws_environment"]

SLOW_DEMO = (
    '[[connections]]\nid = "conn_demo"\nprovider = "demo"\n'
    "options = { first_token_ms = 150, token_ms = 40 }\n"
)
FAST_DEMO = SLOW_DEMO.replace("token_ms = 40", "token_ms = 4")
FUNDS = 10**9


def sdk(gw: RunningGateway, key: str) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=gw.base_url + "/v1", api_key=key, max_retries=0)


async def until(client: AsyncOpenAI, response_id: str, *statuses: str) -> Any:
    """Polls until the response has one of ``statuses`` (bounded)."""
    for _ in range(200):
        found = await client.responses.retrieve(response_id)
        if found.status in statuses:
            return found
        await asyncio.sleep(0.05)
    raise AssertionError(f"{response_id} never reached {statuses}: {found}")


async def logged(gw: RunningGateway, key: str) -> list[dict[str, Any]]:
    await gw.gateway.writer.flush()
    answer = await exchange(gw.host, gw.port, get("/v1/requests?limit=10", key))
    rows: list[dict[str, Any]] = answer.json()["data"]
    return rows


async def test_a_background_response_is_queued_then_polled_to_completed(tmp_path: Path) -> None:
    async with running_gateway(tmp_path, SLOW_DEMO) as gw:
        key = await metered_key(gw.gateway.store, "team", FUNDS)
        async with sdk(gw, key) as client:
            created = await client.responses.create(
                model="sluice/demo", input="Hello", background=True, max_output_tokens=20
            )
            running = await until(client, created.id, "in_progress")
            done = await until(client, created.id, "completed", "incomplete")
        rows = await logged(gw, key)
    assert created.status == "queued" and created.background is True and created.output == []
    assert running.id == created.id and running.output == []
    assert done.status == "incomplete" and done.incomplete_details.reason == "max_output_tokens"
    assert done.background is True and done.usage.output_tokens == 20
    assert done.output_text
    (row,) = rows  # one request, charged once
    assert row["id"] == "req_" + created.id.partition("_")[2]
    assert row["completion_tokens"] == 20 and row["cost"] > 0


async def test_streaming_a_response_again_does_not_hold_the_keys_next_call(
    tmp_path: Path,
) -> None:
    """A stored response streamed again is a stream, not a quick call: paced as one, the
    second it streamed put the key's next poll to sleep about ten seconds (a quick call
    is charged its whole time against a tenth of each second)."""
    async with running_gateway(tmp_path, SLOW_DEMO) as gw:
        key = await metered_key(gw.gateway.store, "team", FUNDS)
        async with sdk(gw, key) as client:
            created = await client.responses.create(
                model="sluice/demo", input="Hello", background=True, max_output_tokens=20
            )
            loop = asyncio.get_running_loop()
            began = loop.time()
            again = await client.responses.retrieve(created.id, stream=True)
            kinds = [event.type async for event in again]
            streamed, began = loop.time() - began, loop.time()
            polled = await client.responses.retrieve(created.id)
            waited = loop.time() - began
    assert kinds[-1] == "response.incomplete" and polled.status == "incomplete"
    assert streamed > 0.5
    assert waited < streamed


async def test_the_stream_picks_up_after_a_sequence_number(tmp_path: Path) -> None:
    """``starting_after=N``: the events after N, ``response.created`` left out; the
    helper (which reads from the start) folds the same answer."""
    async with running_gateway(tmp_path, FAST_DEMO) as gw:
        key = await metered_key(gw.gateway.store, "team", FUNDS)
        async with sdk(gw, key) as client:
            stream = await client.responses.create(
                model="sluice/demo", input="Hi", background=True, stream=True
            )
            first: list[Any] = []
            async for event in stream:
                first.append(event)
                if len(first) == 5:
                    break
            await stream.close()  # the creator leaves; the response runs on
            cut = first[-1].sequence_number
            resumed = await client.responses.retrieve(
                first[0].response.id, stream=True, starting_after=cut
            )
            rest = [event async for event in resumed]
            async with client.responses.stream(response_id=first[0].response.id) as helper:
                folded = await helper.get_final_response()
    numbers = [e.sequence_number for e in first + rest]
    assert first[0].type == "response.created" and first[0].response.background is True
    assert numbers == list(range(len(numbers)))  # nothing lost, nothing twice
    assert rest[0].sequence_number == cut + 1 and rest[-1].type == "response.completed"
    text = "".join(e.delta for e in first + rest if e.type == "response.output_text.delta")
    assert text and folded.output_text == text and folded.status == "completed"


async def test_a_creator_gone_before_the_first_event_still_gets_an_answer(tmp_path: Path) -> None:
    """The original's known failure: a client gone before the first event left the
    response stuck in ``queued``. Here the POST's connection drops at once."""
    config = (
        '[[connections]]\nid = "conn_demo"\nprovider = "demo"\n'
        "options = { first_token_ms = 400, token_ms = 5 }\n"
    )
    async with running_gateway(tmp_path, config) as gw:
        key = await metered_key(gw.gateway.store, "team", FUNDS)
        doc = {"model": "sluice/demo", "input": "Hi", "background": True, "stream": True}
        client = await RawClient.connect(gw.host, gw.port)
        await client.send(post("/v1/responses", json.dumps(doc).encode(), key))
        await asyncio.sleep(0.1)
        await client.close()  # before the first event (400 ms away)
        rows: list[dict[str, Any]] = []
        for _ in range(100):
            rows = await logged(gw, key)
            if rows:
                break
            await asyncio.sleep(0.05)
        async with sdk(gw, key) as sdk_client:
            done = await until(sdk_client, "resp_" + rows[0]["id"].partition("_")[2], "completed")
    assert rows[0]["status"] == "complete" and rows[0]["disconnect"] is None
    assert done.output_text and done.usage.output_tokens > 0


async def test_cancel_stops_it_and_charges_what_it_made(tmp_path: Path) -> None:
    async with running_gateway(tmp_path, SLOW_DEMO) as gw:
        key = await metered_key(gw.gateway.store, "team", FUNDS)
        async with sdk(gw, key) as client:
            created = await client.responses.create(
                model="sluice/demo", input="Hello", background=True, max_output_tokens=200
            )
            await until(client, created.id, "in_progress")
            await asyncio.sleep(0.2)
            cancelled = await client.responses.cancel(created.id)
            again = await client.responses.cancel(created.id)  # idempotent
            polled = await client.responses.retrieve(created.id)
            other = await client.responses.create(model="sluice/demo", input="Hi")
            with pytest.raises(BadRequestError) as not_background:
                await client.responses.cancel(other.id)
        rows = await logged(gw, key)
    assert cancelled.status == "cancelled" and again.status == "cancelled"
    assert polled.status == "cancelled"
    assert not_background.value.code == "response_not_cancellable"
    row = next(r for r in rows if r["id"] == "req_" + created.id.partition("_")[2])
    assert 0 < row["completion_tokens"] < 200 and row["cost"] > 0
    assert row["status"] == "cancelled"


async def test_a_finished_one_cannot_be_cancelled(tmp_path: Path) -> None:
    async with running_gateway(tmp_path) as gw:
        assert gw.dev_key is not None
        async with sdk(gw, gw.dev_key.key) as client:
            created = await client.responses.create(
                model="sluice/demo", input="Hello", background=True
            )
            await until(client, created.id, "completed")
            with pytest.raises(ConflictError) as ended:
                await client.responses.cancel(created.id)
            with pytest.raises(BadRequestError) as past:
                await client.responses.retrieve(created.id, stream=True, starting_after=10**6)
    assert ended.value.code == "response_not_cancellable"
    assert past.value.code == "invalid_value" and past.value.param == "starting_after"


async def test_refused_at_admission_is_an_http_error_and_leaves_nothing(tmp_path: Path) -> None:
    async with running_gateway(tmp_path) as gw:
        assert gw.dev_key is not None
        async with sdk(gw, gw.dev_key.key) as client:
            with pytest.raises(NotFoundError) as unknown:
                await client.responses.create(model="no/such", input="Hi", background=True)
            with pytest.raises(BadRequestError) as unstored:
                await client.responses.create(
                    model="sluice/demo", input="Hi", background=True, store=False
                )
    assert unknown.value.status_code == 404
    assert unstored.value.code == "invalid_value" and unstored.value.param == "store"


async def test_one_account_has_a_bounded_number_running(tmp_path: Path) -> None:
    streams = "[streams]\nbackground_per_account = 1\n"
    async with running_gateway(tmp_path, streams + SLOW_DEMO) as gw:
        key = await metered_key(gw.gateway.store, "team", FUNDS)
        other = await metered_key(gw.gateway.store, "other", FUNDS)
        async with sdk(gw, key) as client, sdk(gw, other) as elsewhere:
            first = await client.responses.create(
                model="sluice/demo", input="Hi", background=True, max_output_tokens=40
            )
            with pytest.raises(RateLimitError) as refused:
                await client.responses.create(model="sluice/demo", input="Hi", background=True)
            with pytest.raises(NotFoundError):  # another account's id is unknown to it
                await elsewhere.responses.retrieve(first.id)
            with pytest.raises(NotFoundError):
                await elsewhere.responses.cancel(first.id)
            await until(client, first.id, "incomplete")
            later = await client.responses.create(model="sluice/demo", input="Hi", background=True)
    assert refused.value.code == "too_many_background_responses"
    assert later.status == "queued"


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
async def test_every_provider_answers_in_the_background(
    tmp_path: Path, fake: FakeUpstream, provider: str
) -> None:
    """Each provider's recorded stream, run detached, polled and streamed again: the
    polled response and the stream helper's fold are the recorded answer."""
    toml, model = PROVIDERS[provider]
    fake.queue(_reply(provider, (FIXTURES / provider / "text.raw").read_bytes()))
    async with running_gateway(tmp_path, toml(fake)) as gw:
        assert gw.dev_key is not None
        async with sdk(gw, gw.dev_key.key) as client:
            created = await client.responses.create(model=model, input="Hi", background=True)
            done = await until(client, created.id, "completed")
            async with client.responses.stream(response_id=created.id) as helper:
                folded = await helper.get_final_response()
    assert created.status == "queued" and done.background is True
    assert summary(done) == recorded(provider, "text")
    assert folded.output_text == done.output_text and folded.id == created.id
    assert len(fake.requests) == 1  # the stream read again asked the upstream nothing


async def test_an_upstream_that_fails_leaves_it_failed_with_the_error(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    """Before the first event (every target refused) and mid-stream (the upstream cut
    off): ``failed``, with the error the stream's reader was told."""
    fake.queue(Reply.json({"error": {"message": "down"}}, status=500))
    fake.queue(Reply.stream(*text_stream("one ", "two ")[:2], Cut()))
    async with running_gateway(tmp_path, openai_connection_toml(fake.base_url)) as gw:
        assert gw.dev_key is not None
        async with sdk(gw, gw.dev_key.key) as client:
            before = await client.responses.create(
                model="test/gpt-fake", input="Hi", background=True
            )
            early = await until(client, before.id, "failed")
            during = await client.responses.create(
                model="test/gpt-fake", input="Hi", background=True
            )
            late = await until(client, during.id, "failed")
    assert early.error is not None and early.error.code == "upstream_http_error"
    assert "HTTP 500" in early.error.message
    assert late.error is not None and late.error.code
    assert late.output_text == "one "  # what it made before the cut


async def test_a_gateway_that_stops_leaves_it_failed(tmp_path: Path) -> None:
    """Past the grace period a stop cuts it: stored ``failed``, ``server_shutting_down``,
    read back by the gateway started next on the same storage."""
    async with running_gateway(tmp_path, SLOW_DEMO, stop_grace=0.3) as gw:
        key = await metered_key(gw.gateway.store, "team", FUNDS)
        async with sdk(gw, key) as client:
            made = await client.responses.create(
                model="sluice/demo", input="Hi", background=True, max_output_tokens=300
            )
            await until(client, made.id, "in_progress")
    async with running_gateway(tmp_path, SLOW_DEMO) as gw, sdk(gw, key) as client:
        found = await client.responses.retrieve(made.id)
    assert found.status == "failed" and found.error is not None
    assert found.error.model_dump()["code"] == "server_shutting_down"


def anthropic_paced(gap: float) -> Reply:
    """An Anthropic stream of sixteen pieces with a pause between events."""
    spaced: list[Any] = []
    for step in anthropic.text_stream(*[f"p{i} " for i in range(16)]):
        spaced += [step, Pause(gap)]
    return Reply.stream(*spaced)


async def test_an_anthropic_background_stream_dropped_at_random_folds_the_uncut_answer(
    tmp_path: Path, fake: FakeUpstream
) -> None:
    """The issue's proof: the openai SDK, an Anthropic upstream, the stream dropped at a
    random sequence number, picked up with ``starting_after``: the events join with
    none lost or repeated, and the helper folds the answer an uncut request gets."""
    rng = random.Random(25)
    fake.queue(anthropic_paced(0.0))
    async with running_gateway(tmp_path, anthropic_toml(fake)) as gw:
        assert gw.dev_key is not None
        async with sdk(gw, gw.dev_key.key) as client:
            async with client.responses.stream(model="test/claude", input="Hi") as uncut:
                count = len([event async for event in uncut])
                whole = await uncut.get_final_response()
            for _ in range(3):
                fake.queue(anthropic_paced(0.01))
                stream = await client.responses.create(
                    model="test/claude", input="Hi", background=True, stream=True
                )
                drop_at = rng.randrange(1, count - 1)  # a sequence number, not the last
                first: list[Any] = []
                async for event in stream:
                    first.append(event)
                    if event.sequence_number == drop_at:
                        break
                await stream.close()
                made = first[0].response.id
                rest = await client.responses.retrieve(made, stream=True, starting_after=drop_at)
                numbers = [e.sequence_number for e in first + [e async for e in rest]]
                assert numbers == list(range(len(numbers))), drop_at
                async with client.responses.stream(response_id=made) as helper:
                    folded = await helper.get_final_response()
                assert (
                    folded.output_text == whole.output_text == "".join(f"p{i} " for i in range(16))
                )
                assert folded.usage == whole.usage and folded.status == "completed"
    assert len(fake.requests) == 4  # one upstream call per request, none for a resume


async def test_cancel_closes_the_upstream_within_50_ms(tmp_path: Path, fake: FakeUpstream) -> None:
    fake.queue(anthropic_paced(0.2))
    async with running_gateway(tmp_path, anthropic_toml(fake)) as gw:
        assert gw.dev_key is not None
        async with sdk(gw, gw.dev_key.key) as client:
            made = await client.responses.create(model="test/claude", input="Hi", background=True)
            await until(client, made.id, "in_progress")
            began = asyncio.get_running_loop().time()
            cancelled = await client.responses.cancel(made.id)
            await asyncio.wait_for(fake.hung_up.wait(), 2)
    assert cancelled.status == "cancelled"
    assert fake.hangups[0] - began < 0.05, fake.hangups[0] - began
