"""sluice/routing/upstream.py as tables: one opened attempt's stream over a scripted
response (one step per upstream read) and the real OpenAI-compatible translator, fed
OpenAI SSE bytes. What ``open`` reads, what ``pump`` sinks, and what each ending does
to the upstream connection (closed, released, or left to the caller)."""

from __future__ import annotations

import asyncio
from functools import partial

import pytest
from msgspec import UNSET

from sluice.core.batch import ChunkBatch
from sluice.core.usage import TokenUsage
from sluice.errors import ApiError, GuardrailBlockedError, RequestTimeoutError
from sluice.exchange.ports import ClientGoneError
from sluice.providers.base import StreamTranslator
from sluice.providers.openai_stream import OpenAIStreamTranslator
from sluice.providers.registry import AdapterRegistry
from sluice.routing.upstream import TURN_BYTES, UpstreamStream
from tests.support.fake_openai import DONE, chunk
from tests.support.fake_transport import UPSTREAM_KEY, ScriptedResponse, Step, connection
from tests.support.routing import ROLE, plan, request, setup

HI, THERE, FIN = chunk(content="Hi"), chunk(content=" there"), chunk(finish="stop")
USAGE = chunk(usage={"prompt_tokens": 7, "completion_tokens": 2}, choices=False)
PING = b": ping\n\n"


def error_event(message: str = "busy") -> bytes:
    return b'data: {"error":{"message":"%s"}}\n\n' % message.encode()


def translator() -> StreamTranslator:
    return AdapterRegistry(lambda p: f"{p}_1").adapter("openai-compatible").stream(request())


def stream_over(
    steps: list[Step], made: StreamTranslator | None = None
) -> tuple[UpstreamStream, ScriptedResponse]:
    attempt = plan(connection("a")).attempts[0]
    _, _, router = setup({})
    resp = ScriptedResponse(steps)
    scrub = partial(router.scrub, target=attempt.target)
    return UpstreamStream(attempt, resp, made or translator(), scrub), resp


def kinds(batch: ChunkBatch) -> list[str]:
    out = []
    for choices in batch:
        choice = choices[0]
        if choice.finish_reason is not None:
            out.append(f"finish:{choice.finish_reason}")
        elif choice.delta.role is not UNSET:
            out.append("role")
        else:
            out.append(f"content:{choice.delta.content}")
    return out


@pytest.mark.parametrize(
    ("steps", "reads", "first"),
    [
        ([ROLE, HI, FIN, DONE], 2, ["role", "content:Hi"]),
        ([ROLE + HI, FIN, DONE], 1, ["role", "content:Hi"]),
        ([ROLE, PING, PING, HI, DONE], 4, ["role", "content:Hi"]),
        ([ROLE, FIN, DONE], 2, ["role", "finish:stop"]),
        ([ROLE + HI + FIN + USAGE + DONE], 1, ["role", "content:Hi", "finish:stop"]),
    ],
    ids=["role-apart", "role-with-content", "comments-between", "finish-only", "all-in-one-read"],
)
async def test_open_reads_until_the_first_event_beyond_the_role(
    steps: list[Step], reads: int, first: list[str]
) -> None:
    stream, resp = stream_over(steps)
    await stream.open(stall=7.5)
    assert resp.reads == reads
    assert (stream.ended, resp.stall) == (False, 7.5)  # watched from here on
    assert kinds(stream.take_first()) == first
    assert stream.take_first() == []  # taken once


@pytest.mark.parametrize(
    ("steps", "code", "ended"),
    [
        ([ROLE], "stream_incomplete", True),
        ([PING], "upstream_empty", True),
        ([ROLE, error_event()], "upstream_stream_error", False),
        ([ROLE, RequestTimeoutError("Stalled.", code="stream_stalled")], "stream_stalled", False),
    ],
    ids=["role-then-end", "nothing", "error-event", "read-error"],
)
async def test_open_raises_when_the_upstream_fails_before_an_event(
    steps: list[Step], code: str, ended: bool
) -> None:
    stream, resp = stream_over(steps)
    with pytest.raises(ApiError) as caught:
        await stream.open(stall=7.5)
    assert caught.value.code == code
    assert stream.ended is ended
    assert (resp.stall, resp.closed) == (None, False)  # closing it is the router's call


class EmitsAtEnd(OpenAIStreamTranslator):
    """A translator that hands everything over at the end of input (as one for a
    provider that frames its answer only once it is whole would): the real one, held."""

    def __init__(self) -> None:
        super().__init__(lambda p: f"{p}_1")
        self._held: ChunkBatch = []

    def feed(self, data: bytes) -> ChunkBatch:
        self._held += super().feed(data)
        return []

    def finish(self) -> ChunkBatch:
        held, self._held = self._held, []
        return held + super().finish()


async def test_an_upstream_that_finished_while_opening_is_ended() -> None:
    stream, resp = stream_over([ROLE, HI, FIN, USAGE, DONE], EmitsAtEnd())
    await stream.open(stall=7.5)
    assert (stream.ended, resp.reads, resp.stall) == (True, 6, None)  # nothing left to watch
    assert kinds(stream.take_first()) == ["role", "content:Hi", "finish:stop"]
    sunk: list[ChunkBatch] = []

    async def sink(batch: ChunkBatch) -> None:
        sunk.append(batch)

    await stream.pump(sink)
    assert (sunk, resp.reads, resp.released, resp.closed) == ([], 6, True, False)


async def pumped(rest: list[Step]) -> tuple[UpstreamStream, ScriptedResponse, list[list[str]]]:
    """Opened on ``ROLE, HI``, then ``rest`` pumped into a recording sink."""
    stream, resp = stream_over([ROLE, HI, *rest])
    await stream.open(stall=7.5)
    sunk: list[list[str]] = []

    async def sink(batch: ChunkBatch) -> None:
        sunk.append(kinds(batch))

    await stream.pump(sink)
    return stream, resp, sunk


@pytest.mark.parametrize(
    ("rest", "sunk"),
    [
        ([THERE, FIN, USAGE, DONE], [["content: there"], ["finish:stop"]]),
        ([PING, THERE, PING, FIN + USAGE + DONE], [["content: there"], ["finish:stop"]]),
        ([THERE + FIN, USAGE, DONE], [["content: there", "finish:stop"]]),
        ([FIN, USAGE, DONE, b"data: ignored after the end\n\n"], [["finish:stop"]]),
    ],
    ids=["one-per-read", "empty-reads-not-sunk", "two-in-one-read", "nothing-after-done"],
)
async def test_pump_sinks_each_non_empty_batch_and_releases(
    rest: list[Step], sunk: list[list[str]]
) -> None:
    stream, resp, got = await pumped(rest)
    assert got == sunk
    assert (resp.released, resp.closed) == (True, False)
    assert stream.translator.usage == TokenUsage(prompt_tokens=7, completion_tokens=2)


STALLED = RequestTimeoutError(f"Stalled after {UPSTREAM_KEY}.", code="stream_stalled")


@pytest.mark.parametrize(
    ("rest", "sunk", "code", "message"),
    [
        ([THERE + error_event("down")], [["content: there"]], "upstream_stream_error", "down"),
        ([THERE, error_event("down")], [["content: there"]], "upstream_stream_error", "down"),
        (
            [THERE, error_event(f"bad key {UPSTREAM_KEY}")],
            [["content: there"]],
            "upstream_stream_error",
            "bad key [redacted]",
        ),
        (
            [THERE],
            [["content: there"]],
            "stream_incomplete",
            "The response stream ended before it completed.",
        ),
        ([THERE, STALLED], [["content: there"]], "stream_stalled", "Stalled after [redacted]."),
    ],
    ids=["error-with-content", "error-after-content", "scrubbed", "cut", "read-error-scrubbed"],
)
async def test_an_upstream_failure_closes_the_upstream_and_is_raised_scrubbed(
    rest: list[Step], sunk: list[list[str]], code: str, message: str
) -> None:
    stream, resp = stream_over([ROLE, HI, *rest])
    await stream.open(stall=7.5)
    got: list[list[str]] = []

    async def sink(batch: ChunkBatch) -> None:
        got.append(kinds(batch))

    with pytest.raises(ApiError) as caught:
        await stream.pump(sink)
    assert got == sunk  # the batch before the failure went out first
    assert (caught.value.code, caught.value.message) == (code, message)
    assert (resp.closed, resp.released) == (True, False)


async def test_a_failure_read_with_the_first_event_opens_then_raises_at_once() -> None:
    """The first event counts as the client's to see, so the attempt is opened (no
    failover); the failure read with it is raised by the first pump, nothing sunk."""
    stream, resp = stream_over([ROLE + HI + error_event("down"), FIN, DONE])
    await stream.open(stall=7.5)
    assert kinds(stream.take_first()) == ["role", "content:Hi"]
    sunk: list[ChunkBatch] = []

    async def sink(batch: ChunkBatch) -> None:
        sunk.append(batch)

    with pytest.raises(ApiError) as caught:
        await stream.pump(sink)
    assert (caught.value.code, sunk, resp.reads, resp.closed) == (
        "upstream_stream_error",
        [],
        1,
        True,
    )


@pytest.mark.parametrize(
    "gone", [ClientGoneError(), asyncio.CancelledError()], ids=["client-gone", "cancelled"]
)
async def test_a_sink_error_leaves_the_upstream_to_the_caller(gone: BaseException) -> None:
    stream, resp = stream_over([ROLE, HI, THERE, chunk(content="!"), FIN, USAGE, DONE])
    await stream.open(stall=7.5)

    async def leaving(batch: ChunkBatch) -> None:
        raise gone

    with pytest.raises(type(gone)):
        await stream.pump(leaving)
    assert (resp.closed, resp.released, resp.left) == (False, False, 4)
    unsent: list[list[str]] = []

    async def drain(batch: ChunkBatch) -> None:
        unsent.append(kinds(batch))

    await stream.pump(drain)  # the caller may read on (a drain)
    assert unsent == [["content:!"], ["finish:stop"]]
    assert (resp.closed, resp.released) == (False, True)
    assert stream.translator.usage == TokenUsage(prompt_tokens=7, completion_tokens=2)


async def test_an_api_error_from_the_sink_counts_as_a_failure() -> None:
    stream, resp = stream_over([ROLE, HI, THERE, FIN, DONE])
    await stream.open(stall=7.5)

    async def blocking(batch: ChunkBatch) -> None:
        raise GuardrailBlockedError("Blocked.")

    with pytest.raises(GuardrailBlockedError):
        await stream.pump(blocking)
    assert (resp.closed, resp.released) == (True, False)


async def test_close_closes_the_upstream() -> None:
    stream, resp = stream_over([ROLE, HI, FIN, DONE])
    await stream.open(stall=7.5)
    stream.close()
    assert (resp.closed, resp.released) == (True, False)


@pytest.mark.parametrize(("piece", "yields"), [(4000, True), (10, False)], ids=["big", "small"])
async def test_a_big_read_gives_the_loops_other_work_its_turn(piece: int, yields: bool) -> None:
    """A read that returns at once with a lot (a fast upstream's buffered bytes) lets the
    other tasks run before it is translated; small reads go straight on."""
    data = chunk(content="x" * piece) * 16  # 64 KB of events, or a few hundred bytes
    stream, _ = stream_over([ROLE, HI, data, DONE])
    await stream.open(60.0)
    turns = 0

    async def other_work() -> None:
        nonlocal turns
        while True:
            turns += 1
            await asyncio.sleep(0)

    other = asyncio.ensure_future(other_work())
    await asyncio.sleep(0)  # it has started
    before = turns
    batch = await stream.next_batch()
    other.cancel()
    assert batch is not None and len(batch) == 16
    assert (turns > before) is yields


async def test_a_cancel_in_a_big_reads_turn_loses_none_of_it() -> None:
    """A read of TURN_BYTES or more yields before it is translated; a cancel there (the
    client left) keeps the read for whoever reads on (a drain, a flight's joiners)."""
    big = chunk(content="x" * TURN_BYTES)
    stream, resp = stream_over([ROLE + HI, big, FIN, DONE])
    await stream.open(stall=1.0)
    turn = asyncio.ensure_future(stream.next_batch())
    while resp.reads < 2:
        await asyncio.sleep(0)
    turn.cancel()  # in the turn: read, not yet translated
    with pytest.raises(asyncio.CancelledError):
        await turn
    batch = await stream.next_batch()
    assert batch is not None and kinds(batch) == ["content:" + "x" * TURN_BYTES]
    assert resp.reads == 2
