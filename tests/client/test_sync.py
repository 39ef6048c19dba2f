"""The sync client (http.client) on the same core: same results, retries, timeouts and
cancellation as the async one. It blocks, so each test runs it in a thread while the
fake server runs on the test's loop."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TypeVar

import pytest
from msgspec import structs

from sluice.client import (
    AsyncChatClient,
    ChatClient,
    ContentDelta,
    RetryPolicy,
    StreamResult,
    Timeouts,
    stream_chat,
)
from tests.client.test_policy import RecordingUniform
from tests.support.fake_openai import DONE, chunk, text_stream
from tests.support.fake_upstream import Cut, FakeUpstream, Pause, Reply, Step, WaitFor

USER = [{"role": "user", "content": "hi"}]
T = TypeVar("T")


async def blocking(fn: Callable[[], T]) -> T:
    return await asyncio.to_thread(fn)


def client(fake: FakeUpstream, timeouts: Timeouts, sleeps: list[float] | None = None) -> ChatClient:
    return ChatClient(
        fake.base_url,
        "sk-sync",
        timeouts=timeouts,
        retry=RetryPolicy(max_attempts=3, base_delay=1.0),
        uniform=RecordingUniform(0.5),
        sleep=(sleeps if sleeps is not None else []).append,
    )


def untimed(result: StreamResult) -> StreamResult:
    return structs.replace(result, ttft=None, tokens_per_second=None, duration=0.0)


async def test_same_result_as_the_async_client(fake: FakeUpstream) -> None:
    usage = {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
    tools = [
        {"index": 0, "id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    ]
    steps = [*text_stream("Hello", " world", usage=usage)]
    steps.insert(2, chunk(tool_calls=tools))
    fake.queue(Reply.stream(*steps), Reply.stream(*steps))
    sync = await blocking(lambda: client(fake, Timeouts()).stream("m", USER).collect())
    async with AsyncChatClient(fake.base_url, "sk-sync") as c:
        asynchronous = await c.stream("m", USER).collect()
    assert sync.state == "complete" and sync.tool_calls[0].parsed == {}
    assert untimed(sync) == untimed(asynchronous)
    assert fake.requests[0].body == fake.requests[1].body
    assert fake.requests[0].headers["authorization"] == "Bearer sk-sync"


async def test_retried_before_content_with_the_retry_model(fake: FakeUpstream) -> None:
    fake.queue(
        Reply.json({"error": {"message": "busy", "type": "rate_limit_error"}}, 429),
        Reply.stream(chunk(role="assistant", content=""), Cut()),
        Reply.stream(*text_stream("ok")),
    )
    sleeps: list[float] = []
    result = await blocking(
        lambda: client(fake, Timeouts(), sleeps).stream("big", USER, retry_model="small").collect()
    )
    assert (result.state, result.text, result.attempts) == ("complete", "ok", 3)
    assert sleeps == [0.5, 1.0]  # half of the 1 s and 2 s jitter bounds
    assert [r.json()["model"] for r in fake.requests] == ["big", "small", "small"]


async def test_not_retried_for_authentication_or_after_content(fake: FakeUpstream) -> None:
    fake.queue(
        Reply.json({"error": {"message": "no", "type": "authentication_error"}}, 401),
        Reply.stream(chunk(content="par"), Cut()),
    )
    denied = await blocking(lambda: client(fake, Timeouts()).stream("m", USER).collect())
    cut = await blocking(lambda: client(fake, Timeouts()).stream("m", USER).collect())
    assert denied.error is not None
    assert (denied.state, denied.error.status, denied.attempts) == ("error", 401, 1)
    assert (cut.state, cut.text, cut.attempts) == ("incomplete", "par", 1)


@pytest.mark.parametrize(
    ("steps", "code", "text"),
    [
        pytest.param([], "first_event_timeout", "", id="first-event"),
        pytest.param([chunk(content="so far")], "idle_timeout", "so far", id="idle"),
    ],
)
async def test_timeouts(fake: FakeUpstream, steps: list[Step], code: str, text: str) -> None:
    fake.queue(Reply.stream(*steps, WaitFor(asyncio.Event())))
    limits = Timeouts(first_event=0.2, idle=0.2)
    one_try = ChatClient(fake.base_url, timeouts=limits, retry=RetryPolicy(1))
    result = await blocking(lambda: one_try.stream("m", USER).collect())
    assert result.error is not None
    assert (result.state, result.error.code, result.text) == ("error", code, text)
    await asyncio.wait_for(fake.hung_up.wait(), 2)


async def test_a_flowing_answer_outlasts_both_limits(fake: FakeUpstream) -> None:
    steps: list[Step] = []
    for n in range(12):
        steps += [chunk(content=str(n)), Pause(0.05)]
    fake.queue(Reply.stream(*steps, chunk(finish="length"), DONE))
    limits = Timeouts(first_event=0.25, idle=0.25)
    result = await blocking(lambda: client(fake, limits).stream("m", USER).collect())
    assert (result.state, result.text) == ("truncated", "01234567891011")


async def test_closing_the_stream_closes_the_socket(fake: FakeUpstream) -> None:
    fake.queue(Reply.stream(chunk(content="first"), WaitFor(asyncio.Event())))

    def read_one_then_close() -> StreamResult | None:
        with stream_chat(base_url=fake.base_url, api_key=None, model="m", messages=USER) as s:
            for item in s:
                assert item == ContentDelta("first")
                break
        return s.result

    result = await blocking(read_one_then_close)
    await asyncio.wait_for(fake.hung_up.wait(), 2)
    assert result is not None and (result.state, result.text) == ("incomplete", "first")


async def test_a_slow_consumer_is_not_mistaken_for_a_silent_server(fake: FakeUpstream) -> None:
    fake.queue(Reply.stream(*text_stream("a", "b", "c")))

    def slow_reader() -> StreamResult | None:
        limits = Timeouts(first_event=0.1, idle=0.1)
        with ChatClient(fake.base_url, timeouts=limits).stream("m", USER) as stream:
            for _ in stream:
                time.sleep(0.15)
        return stream.result

    result = await blocking(slow_reader)
    assert result is not None and (result.state, result.text) == ("complete", "abc")
