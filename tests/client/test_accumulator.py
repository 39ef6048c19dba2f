"""The pure stream state machine: events out, how a stream ended, what it reassembled."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sluice.client.accumulator import StreamAccumulator
from sluice.client.events import (
    ContentDelta,
    ErrorInfo,
    ReasoningDelta,
    StreamResult,
    ToolCallFragment,
    Usage,
    UsageReport,
)
from tests.support.fake_openai import DONE, chunk

USAGE = {"prompt_tokens": 7, "completion_tokens": 4, "total_tokens": 11}


def event(doc: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(doc).encode() + b"\n\n"


def run(*pieces: bytes, request_id: str | None = None) -> StreamResult:
    acc = StreamAccumulator(0.0)
    acc.open(request_id)
    for piece in pieces:
        acc.feed(piece, 0.0)
    return acc.finish(0.0)


def call(
    index: int | None, *, id: str | None = None, name: str | None = None, args: str = ""
) -> Any:
    doc: dict[str, Any] = {"function": {"arguments": args}}
    if index is not None:
        doc["index"] = index
    if id is not None:
        doc["id"], doc["type"] = id, "function"
    if name is not None:
        doc["function"]["name"] = name
    return doc


def test_events_in_order_role_chunk_and_keep_alive_give_none() -> None:
    acc = StreamAccumulator(0.0)
    out = acc.feed(b": keep-alive\n\n" + chunk(role="assistant", content=""), 0.0)
    assert out == []
    out = acc.feed(chunk(content="Hi") + chunk(reasoning="hmm") + chunk(content=" there"), 0.0)
    assert out == [ContentDelta("Hi"), ReasoningDelta("hmm"), ContentDelta(" there")]
    out = acc.feed(chunk(finish="stop") + chunk(usage=USAGE, choices=False) + DONE, 0.0)
    assert out == [UsageReport(Usage(7, 4, 11))]
    result = acc.finish(0.0)
    assert (result.state, result.text, result.reasoning) == ("complete", "Hi there", "hmm")


@pytest.mark.parametrize(
    ("pieces", "state"),
    [
        pytest.param((chunk(content="a"), chunk(finish="stop"), DONE), "complete", id="complete"),
        pytest.param((chunk(content="a"), chunk(finish="length"), DONE), "truncated", id="length"),
        pytest.param((chunk(content="a"), chunk(finish="stop")), "incomplete", id="no-done"),
        pytest.param((chunk(content="a"), DONE), "incomplete", id="done-without-finish"),
        pytest.param((chunk(content="a"),), "incomplete", id="cut"),
        pytest.param((DONE,), "incomplete", id="done-only"),
        pytest.param((chunk(finish="content_filter"), DONE), "complete", id="content-filter"),
        pytest.param(
            (chunk(content="a"), chunk(finish="stop", index=0), DONE, chunk(content="late")),
            "complete",
            id="nothing-read-after-done",
        ),
    ],
)
def test_states(pieces: tuple[bytes, ...], state: str) -> None:
    result = run(*pieces)
    assert result.state == state
    assert result.ok is (state in ("complete", "truncated"))
    assert (result.error is None) is result.ok


def test_incomplete_names_why_and_a_given_cause_wins() -> None:
    result = run(chunk(content="a"))
    assert result.error == ErrorInfo(
        "connection_error", "the stream ended before a finish_reason and [DONE]", "stream_ended"
    )
    finished = run(chunk(content="a"), chunk(finish="stop"))
    assert finished.error == ErrorInfo(
        "connection_error",
        "the stream ended after its finish_reason, before [DONE]",
        "stream_ended",
    )
    unfinished = run(chunk(content="a"), b"data: [DONE]\n\n")
    assert unfinished.error is not None
    assert unfinished.error.message == "[DONE] came before every choice had a finish_reason"
    acc = StreamAccumulator(0.0)
    acc.feed(chunk(content="a"), 0.0)
    cancelled = ErrorInfo("cancelled", "bye", "client_closed")
    assert acc.finish(0.0, cancelled).error == cancelled


def test_error_event_keeps_partial_text_and_partial_usage() -> None:
    error = {
        "error": {"message": "upstream died", "type": "upstream_error", "code": "stream_error"},
        "usage": {**USAGE, "cost": 0.25, "price_source": "list"},
    }
    result = run(chunk(content="Part"), event(error), chunk(content="never"), DONE)
    assert result.state == "error"
    assert result.text == "Part"
    assert result.error == ErrorInfo("upstream_error", "upstream died", "stream_error")
    assert result.usage == Usage(7, 4, 11, cost=0.25, price_source="list")
    assert result.cost == 0.25


def test_error_event_of_any_server_shape() -> None:
    assert run(event({"error": "boom"})).error == ErrorInfo("server_error", "boom")
    numeric = run(event({"error": {"message": "x", "code": 500}})).error
    assert numeric == ErrorInfo("server_error", "x", "500")


def test_undecodable_event_is_an_error_not_a_crash() -> None:
    result = run(chunk(content="ok"), b"data: {not json\n\n", DONE)
    assert result.state == "error"
    assert result.error is not None and result.error.type == "invalid_response"
    assert result.text == "ok"


def test_usage_chunk_with_empty_choices_is_guarded() -> None:
    usage = {
        **USAGE,
        "prompt_tokens_details": {"cached_tokens": 3},
        "completion_tokens_details": {"reasoning_tokens": 2},
    }
    acc = StreamAccumulator(0.0)
    acc.feed(chunk(content="a") + chunk(finish="stop"), 0.0)
    assert acc.feed(event({"choices": [], "usage": usage}), 0.0) == [
        UsageReport(Usage(7, 4, 11, cached_tokens=3, reasoning_tokens=2))
    ]
    assert acc.feed(event({"usage": None, "choices": []}) + DONE, 0.0) == []
    result = acc.finish(0.0)
    assert result.state == "complete" and result.usage is not None
    assert result.usage.cached_tokens == 3


def test_tool_calls_reassembled_by_index_with_parsed_arguments() -> None:
    pieces = [
        chunk(tool_calls=[call(0, id="call_a", name="weather", args="")]),
        chunk(tool_calls=[call(1, id="call_b", name="time", args="")]),
        chunk(tool_calls=[call(0, args='{"city":')]),
        chunk(tool_calls=[call(1, args='{"tz": "CET"}')]),
        chunk(tool_calls=[call(0, args='"Oslo"}')]),
        chunk(finish="tool_calls"),
        DONE,
    ]
    acc = StreamAccumulator(0.0)
    fragments = [e for p in pieces for e in acc.feed(p, 0.0)]
    assert fragments[0] == ToolCallFragment(0, "", "call_a", "weather")
    assert fragments[2] == ToolCallFragment(0, '{"city":')
    result = acc.finish(0.0)
    assert result.finish_reason == "tool_calls"
    assert [(c.index, c.id, c.name, c.parsed) for c in result.tool_calls] == [
        (0, "call_a", "weather", {"city": "Oslo"}),
        (1, "call_b", "time", {"tz": "CET"}),
    ]
    assert all(c.valid_json for c in result.tool_calls)


def test_arguments_that_do_not_parse_are_kept_as_text() -> None:
    pieces = (chunk(tool_calls=[call(0, id="c", name="f", args='{"a": ')]), chunk(finish="stop"))
    (tool,) = run(*pieces, DONE).tool_calls
    assert (tool.arguments, tool.valid_json, tool.parsed) == ('{"a": ', False, None)


def test_tool_calls_without_index_start_a_new_call_per_id() -> None:
    pieces = [
        chunk(tool_calls=[call(None, id="c1", name="one", args='{"x":')]),
        chunk(tool_calls=[call(None, args="1}")]),
        chunk(tool_calls=[call(None, id="c2", name="two", args="{}")]),
        chunk(finish="tool_calls"),
        DONE,
    ]
    calls = run(*pieces).tool_calls
    assert [(c.index, c.id, c.name, c.parsed) for c in calls] == [
        (0, "c1", "one", {"x": 1}),
        (1, "c2", "two", {}),
    ]


def test_choices_kept_apart_and_every_choice_must_finish() -> None:
    both = run(
        chunk(content="Red", index=0),
        chunk(content="Blue", index=1),
        chunk(finish="stop", index=1),
        chunk(finish="length", index=0),
        DONE,
    )
    assert [(c.text, c.finish_reason) for c in both.choices] == [
        ("Red", "length"),
        ("Blue", "stop"),
    ]
    assert both.state == "truncated"
    one_open = run(chunk(content="x", index=1), chunk(finish="stop", index=0), DONE)
    assert one_open.state == "incomplete"


def test_sluice_identity_and_cost_are_read_when_present() -> None:
    doc = {
        "id": "req_abc",
        "model": "sluice/demo",
        "provider": "p",
        "connection": "conn_x",
        "route": "standby_a",
        "route_name": "support",
        "choices": [{"index": 0, "delta": {"content": "Hi"}, "finish_reason": "stop"}],
    }
    usage = {"choices": [], "usage": {**USAGE, "cost": 1e-5, "price_source": "custom"}}
    result = run(event(doc), event({**usage, "credits_used": 0.5}), DONE)
    assert (result.request_id, result.model, result.provider) == ("req_abc", "sluice/demo", "p")
    assert (result.connection, result.route, result.route_name) == (
        "conn_x",
        "standby_a",
        "support",
    )
    assert (result.cost, result.credits_used) == (1e-5, 0.5)
    assert result.usage is not None and result.usage.price_source == "custom"


def test_plain_openai_chunks_leave_extensions_empty_and_header_id_wins() -> None:
    result = run(chunk(content="Hi"), chunk(finish="stop"), DONE, request_id="req_header")
    assert result.state == "complete"
    assert result.request_id == "req_header"
    assert result.model == "gpt-fake"
    assert (result.provider, result.route, result.cost) == (None, None, None)


def test_ttft_and_tokens_per_second_from_event_times() -> None:
    acc = StreamAccumulator(10.0, attempt=2, model="m")
    acc.feed(chunk(role="assistant", content=""), 10.5)
    assert not acc.content_seen
    acc.feed(chunk(content="a"), 11.0)
    assert acc.content_seen
    acc.feed(chunk(content="b") + chunk(content="c"), 13.0)
    acc.feed(chunk(finish="stop") + DONE, 13.5)
    result = acc.finish(14.0)
    assert result.ttft == 1.0  # from the call's start, not the attempt's
    assert result.tokens_per_second == (3 - 1) / 2  # 3 events: 2 after the first, in 2 s
    assert (result.duration, result.attempts, result.requested_model) == (4.0, 2, "m")
    with_usage = StreamAccumulator(0.0)
    with_usage.feed(chunk(content="a"), 1.0)
    with_usage.feed(chunk(content="b"), 3.0)
    with_usage.feed(chunk(usage={**USAGE, "completion_tokens": 10}, choices=False), 3.0)
    assert with_usage.finish(3.0).tokens_per_second == (10 - 1) / 2  # the usage count wins


def test_a_single_content_event_has_a_ttft_but_no_rate() -> None:
    acc = StreamAccumulator(0.0)
    acc.feed(chunk(content="a") + chunk(finish="stop") + DONE, 0.25)
    result = acc.finish(1.0)
    assert (result.ttft, result.tokens_per_second) == (0.25, None)
