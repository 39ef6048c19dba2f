"""The async client against a local scriptable server: retries, timeouts, cancellation.

Backoff sleeps and jitter are injected (no test waits for a backoff); timeouts run on
the real clock with limits far apart from the scripted pauses.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from sluice.client import (
    AsyncChatClient,
    ContentDelta,
    ErrorInfo,
    RetryPolicy,
    StreamResult,
    Timeouts,
    astream_chat,
)
from tests.client.test_policy import RecordingUniform
from tests.support.fake_openai import DONE, chunk, completion, text_stream
from tests.support.fake_upstream import Cut, FakeUpstream, Pause, Reply, Step, WaitFor

USER = [{"role": "user", "content": "hi"}]
QUICK = Timeouts(first_event=2.0, idle=2.0)


class Sleeps:
    """An injected ``asyncio.sleep`` that only records."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


@asynccontextmanager
async def client(
    fake: FakeUpstream,
    *,
    retry: RetryPolicy | None = None,
    timeouts: Timeouts = QUICK,
    uniform: RecordingUniform | None = None,
    sleep: Sleeps | None = None,
) -> AsyncIterator[AsyncChatClient]:
    async with AsyncChatClient(
        fake.base_url,
        "sk-test",
        timeouts=timeouts,
        retry=retry or RetryPolicy(max_attempts=3, base_delay=0.25, max_delay=4.0),
        uniform=uniform or RecordingUniform(0.5),
        sleep=sleep or Sleeps(),
    ) as c:
        yield c


def error(status: int, kind: str, code: str | None = None, **headers: str) -> Reply:
    body = {"error": {"message": f"{kind} says no", "type": kind, "code": code, "param": None}}
    return Reply.json(body, status, **headers)


def never() -> WaitFor:
    return WaitFor(asyncio.Event())


async def test_events_then_exactly_one_result(fake: FakeUpstream) -> None:
    usage = {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
    fake.queue(Reply.stream(*text_stream("Hello", " world", usage=usage)))
    async with client(fake) as c:
        items = [item async for item in c.stream("test/model", USER, max_tokens=9)]
    assert [i for i in items if isinstance(i, ContentDelta)] == [
        ContentDelta("Hello"),
        ContentDelta(" world"),
    ]
    result = items[-1]
    assert isinstance(result, StreamResult)
    assert [i for i in items if isinstance(i, StreamResult)] == [result]
    assert (result.state, result.text, result.attempts) == ("complete", "Hello world", 1)
    assert result.usage is not None and result.usage.completion_tokens == 2
    assert result.ttft is not None and result.ttft > 0
    sent = fake.requests[0]
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == "Bearer sk-test"
    assert sent.json()["stream"] is True and sent.json()["max_tokens"] == 9


async def test_retried_before_first_token_within_the_jitter_bounds(fake: FakeUpstream) -> None:
    fake.queue(
        error(502, "upstream_error"),
        error(503, "service_unavailable"),
        Reply.stream(*text_stream("ok")),
    )
    uniform, sleeps = RecordingUniform(0.5), Sleeps()
    async with client(fake, uniform=uniform, sleep=sleeps) as c:
        result = await c.stream("m", USER).collect()
    assert (result.state, result.text, result.attempts) == ("complete", "ok", 3)
    assert len(fake.requests) == 3
    assert uniform.calls == [(0.0, 0.25), (0.0, 0.5)]  # full jitter, doubling
    assert sleeps.delays == [0.125, 0.25]


async def test_retry_after_is_honoured(fake: FakeUpstream) -> None:
    fake.queue(
        error(429, "rate_limit_error", **{"Retry-After": "3"}), Reply.stream(*text_stream("x"))
    )
    sleeps = Sleeps()
    async with client(fake, sleep=sleeps) as c:
        result = await c.stream("m", USER).collect()
    assert result.ok and sleeps.delays == [3.0]


@pytest.mark.parametrize(
    "first",
    [
        pytest.param(
            Reply.stream(
                chunk(role="assistant", content=""),
                b'data: {"error": {"message": "down", "type": "upstream_error"}}\n\n',
            ),
            id="error-event-after-role-chunk",
        ),
        pytest.param(Reply.stream(chunk(role="assistant", content=""), Cut()), id="cut"),
        pytest.param(Reply.reset(), id="reset-before-head"),
        pytest.param(Reply.stream(b": keep-alive\n\n", DONE), id="done-without-content"),
    ],
)
async def test_failures_before_content_are_retried(fake: FakeUpstream, first: Reply) -> None:
    fake.queue(first, Reply.stream(*text_stream("second")))
    async with client(fake) as c:
        result = await c.stream("m", USER).collect()
    assert (result.state, result.text, result.attempts) == ("complete", "second", 2)


@pytest.mark.parametrize(
    ("reply", "state", "kind"),
    [
        pytest.param(
            Reply.stream(chunk(role="assistant", content=""), chunk(content="Hal"), Cut()),
            "incomplete",
            "connection_error",
            id="cut",
        ),
        pytest.param(
            Reply.stream(
                chunk(content="Hal"),
                b'data: {"error": {"message": "x", "type": "upstream_error"}}\n\n',
            ),
            "error",
            "upstream_error",
            id="error-event",
        ),
    ],
)
async def test_never_retried_after_content(
    fake: FakeUpstream, reply: Reply, state: str, kind: str
) -> None:
    fake.queue(reply)
    async with client(fake) as c:
        result = await c.stream("m", USER).collect()
    assert (result.state, result.text, result.attempts) == (state, "Hal", 1)
    assert result.error is not None and result.error.type == kind
    assert len(fake.requests) == 1


@pytest.mark.parametrize(
    ("status", "kind", "code"),
    [
        (400, "invalid_request_error", None),
        (401, "authentication_error", "invalid_api_key"),
        (402, "budget_exceeded", "budget_exceeded"),
        (404, "model_not_found", "model_not_found"),
        (400, "guardrail_error", "guardrail_blocked"),
        (503, "guardrail_error", "guardrail_unavailable"),
    ],
)
async def test_never_retried_for_these_types(
    fake: FakeUpstream, status: int, kind: str, code: str | None
) -> None:
    fake.queue(error(status, kind, code, **{"X-Request-Id": "req_err"}))
    async with client(fake) as c:
        result = await c.stream("m", USER).collect()
    assert result.state == "error"
    assert result.error == ErrorInfo(kind, f"{kind} says no", code, status)
    assert (result.attempts, len(fake.requests), result.request_id) == (1, 1, "req_err")


async def test_retry_model_serves_the_retry(fake: FakeUpstream) -> None:
    fake.queue(error(503, "service_unavailable"), Reply.stream(*text_stream("fast")))
    async with client(fake) as c:
        result = await c.stream("big/slow", USER, retry_model="small/fast").collect()
    assert [r.json()["model"] for r in fake.requests] == ["big/slow", "small/fast"]
    assert (result.requested_model, result.text) == ("small/fast", "fast")


async def test_a_retry_on_another_model_does_not_wait_out_the_failed_ones_retry_after(
    fake: FakeUpstream,
) -> None:
    """The 25 s a rate-limited model asks for are its own: the retry model goes at once
    (the backoff only); a second failure on the retry model is honoured."""
    limited = error(429, "rate_limit_error", **{"Retry-After": "25"})
    fake.queue(limited, error(429, "rate_limit_error", **{"Retry-After": "3"}))
    fake.queue(Reply.stream(*text_stream("ok")))
    sleeps = Sleeps()
    async with client(fake, sleep=sleeps) as c:
        result = await c.stream("big/slow", USER, retry_model="small/fast").collect()
    assert [r.json()["model"] for r in fake.requests] == ["big/slow", "small/fast", "small/fast"]
    assert result.text == "ok"
    assert sleeps.delays == [0.125, 3.0]  # backoff (0.5 of 0.25 s), then small/fast's own


async def test_regenerate_is_the_explicit_retry_after_content(fake: FakeUpstream) -> None:
    fake.queue(Reply.stream(chunk(content="Half"), Cut()), Reply.stream(*text_stream("Whole")))
    async with client(fake) as c:
        stream = c.stream("m", USER, temperature=0.5)
        first = await stream.collect()
        second = await stream.regenerate().collect()
    assert (first.state, first.text) == ("incomplete", "Half")
    assert (second.state, second.text) == ("complete", "Whole")
    assert fake.requests[0].json() == fake.requests[1].json()


async def test_a_200_that_is_not_a_stream_is_an_error(fake: FakeUpstream) -> None:
    fake.queue(Reply.json(completion("whole")))
    async with client(fake) as c:
        result = await c.stream("m", USER).collect()
    assert result.error is not None
    assert (result.state, result.error.code, len(fake.requests)) == ("error", "not_sse", 1)


async def test_refused_connection_is_retried_then_an_error() -> None:
    dead = FakeUpstream()
    await dead.start()
    await dead.close()  # a port nobody listens on any more
    sleeps = Sleeps()
    async with client(dead, sleep=sleeps) as c:
        result = await c.stream("m", USER).collect()
    assert (result.state, result.attempts, len(sleeps.delays)) == ("error", 3, 2)
    assert result.error is not None and result.error.type == "connection_error"


# --- timeouts (real clock) ----------------------------------------------------------


async def test_first_event_timeout_closes_the_connection(fake: FakeUpstream) -> None:
    fake.queue(Reply.stream(never()))
    async with client(fake, timeouts=Timeouts(first_event=0.2), retry=RetryPolicy(1)) as c:
        result = await c.stream("m", USER).collect()
    assert result.error is not None
    assert (result.state, result.error.code) == ("error", "first_event_timeout")
    await asyncio.wait_for(fake.hung_up.wait(), 2)


async def test_keep_alives_do_not_count_as_events(fake: FakeUpstream) -> None:
    keep_alives: list[Step] = [b": keep-alive\n\n", Pause(0.05)]
    fake.queue(Reply.stream(*keep_alives * 20))
    async with client(fake, timeouts=Timeouts(first_event=0.3), retry=RetryPolicy(1)) as c:
        result = await c.stream("m", USER).collect()
    assert result.error is not None and result.error.code == "first_event_timeout"


async def test_idle_timeout_keeps_the_partial_answer(fake: FakeUpstream) -> None:
    fake.queue(Reply.stream(chunk(content="so far"), never()))
    async with client(fake, timeouts=Timeouts(idle=0.2)) as c:
        result = await c.stream("m", USER).collect()
    assert result.error is not None
    assert (result.state, result.error.code, result.text) == ("error", "idle_timeout", "so far")
    assert len(fake.requests) == 1  # content was shown: no retry


async def test_a_long_answer_that_keeps_flowing_is_never_cut(fake: FakeUpstream) -> None:
    steps: list[Step] = [chunk(role="assistant", content=""), Pause(0.05)]
    for n in range(16):
        steps += [chunk(content=f"{n} "), Pause(0.05)]
    fake.queue(Reply.stream(*steps, chunk(finish="stop"), DONE))
    limits = Timeouts(first_event=0.3, idle=0.3)  # the whole answer takes ~0.85 s
    async with client(fake, timeouts=limits) as c:
        result = await c.stream("m", USER).collect()
    assert result.state == "complete"
    assert result.duration > 2 * 0.3
    assert result.text == "".join(f"{n} " for n in range(16))


async def test_total_deadline_cuts_even_a_flowing_answer(fake: FakeUpstream) -> None:
    flowing: list[Step] = [chunk(content="."), Pause(0.05)]
    fake.queue(Reply.stream(*flowing * 40))
    async with client(fake, timeouts=Timeouts(idle=1.0, total=0.4)) as c:
        result = await c.stream("m", USER).collect()
    assert result.error is not None
    assert (result.state, result.error.code) == ("error", "deadline_exceeded")
    assert 0 < len(result.text) < 40


# --- cancellation -----------------------------------------------------------------


async def test_closing_the_stream_closes_the_connection(fake: FakeUpstream) -> None:
    fake.queue(Reply.stream(chunk(content="first"), never()))
    async with client(fake) as c:
        stream = c.stream("m", USER)
        async with stream:
            async for item in stream:
                assert item == ContentDelta("first")
                break
        await asyncio.wait_for(fake.hung_up.wait(), 2)
    assert stream.result is not None
    assert (stream.result.state, stream.result.text) == ("incomplete", "first")
    assert stream.result.error is not None and stream.result.error.type == "cancelled"


async def test_cancelling_the_task_while_waiting_closes_the_connection(
    fake: FakeUpstream,
) -> None:
    fake.queue(Reply.stream(chunk(content="late"), delay=30))
    stream = astream_chat(base_url=fake.base_url, api_key=None, model="m", messages=USER)
    task = asyncio.ensure_future(stream.collect())
    while not fake.requests:
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.wait_for(fake.hung_up.wait(), 2)
    assert stream.result is not None and stream.result.state == "incomplete"


async def test_one_shot_stream_closes_its_own_pool(fake: FakeUpstream) -> None:
    stream = astream_chat(
        base_url=fake.base_url, api_key="k", model="m", messages=USER, seed=7, n=1
    )
    result = await stream.collect()
    assert result.text == "Hello world"
    assert json.loads(fake.requests[0].body)["seed"] == 7
    again = await stream.regenerate().collect()  # reopens a pool, closes it again
    assert again.text == "Hello world"


async def test_a_slow_consumer_is_not_mistaken_for_a_silent_server(fake: FakeUpstream) -> None:
    fake.queue(Reply.stream(*text_stream("a", "b", "c")))  # all sent at once
    async with client(fake, timeouts=Timeouts(first_event=0.1, idle=0.1)) as c:
        stream = c.stream("m", USER)
        async for _ in stream:
            await asyncio.sleep(0.15)  # longer than idle between every read
    assert stream.result is not None
    assert (stream.result.state, stream.result.text) == ("complete", "abc")
