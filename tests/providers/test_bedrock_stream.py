"""ConverseStream edge cases beyond the recorded fixtures: exception frames, damage,
what may follow messageStop, server-side tools."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sluice.providers.bedrock.stream import BedrockStreamTranslator
from tests.support import fake_bedrock as b
from tests.support.gateway import counting_ids
from tests.support.transcript import transcript


def run(*frames: bytes) -> list[dict[str, Any]]:
    return transcript(BedrockStreamTranslator(counting_ids()), [b"".join(frames)])


def end(lines: list[dict[str, Any]]) -> Any:
    return lines[-1]["end"]


def contents(lines: list[dict[str, Any]]) -> str:
    return "".join(line["choices"][0]["delta"].get("content", "") for line in lines[:-1])


STREAM_EXCEPTIONS = [
    ("throttlingException", "rate_limit_error", "upstream_rate_limited"),
    ("modelStreamErrorException", "upstream_error", "upstream_model_error"),
    ("validationException", "invalid_request_error", None),
    ("internalServerException", "upstream_error", "upstream_http_error"),
    ("serviceUnavailableException", "service_unavailable", "upstream_overloaded"),
    ("modelTimeoutException", "request_timeout", "upstream_timeout"),
    ("somethingNewException", "upstream_error", "upstream_stream_error"),
]


@pytest.mark.parametrize(
    ("exception_type", "error_type", "code"),
    STREAM_EXCEPTIONS,
    ids=[e[0] for e in STREAM_EXCEPTIONS],
)
def test_exception_frames_become_our_errors(
    exception_type: str, error_type: str, code: str | None
) -> None:
    lines = run(
        b.message_start(),
        b.text_delta("Hi"),
        b.exception(exception_type, "It broke."),
        b.text_delta(" never seen"),
    )
    assert end(lines) == {"type": error_type, "code": code}
    assert contents(lines) == "Hi"


def test_generic_error_frame() -> None:
    frame = b.frame(
        {":message-type": "error", ":error-code": "InternalFailure", ":error-message": "boom"}, b""
    )
    assert end(run(b.message_start(), frame)) == {
        "type": "upstream_error",
        "code": "upstream_stream_error",
    }


@pytest.mark.parametrize(
    "bad",
    [
        b.text_delta("x")[:-1] + b"\x00",  # message CRC
        b.event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": 5}}),
        b.frame({":message-type": "event", ":event-type": "messageStop"}, b"{not json"),
        b.frame({":message-type": "surprise"}, b""),
        b.tool_delta(3, '{"a": 1}'),  # arguments for a block that never started
    ],
    ids=["crc", "wrong-type", "not-json", "unknown-message-type", "delta-before-start"],
)
def test_malformed_frames_fail_the_stream_after_what_came_before(bad: bytes) -> None:
    lines = run(b.message_start(), b.text_delta("ok"), bad, b.message_stop())
    assert end(lines) == {"type": "upstream_error", "code": "upstream_malformed_event"}
    assert contents(lines) == "ok"


def test_after_message_stop_only_metadata_counts() -> None:
    lines = run(
        *b.text_stream("Done")[:-1],
        b.exception("throttlingException", "late"),
        b.text_delta(" extra"),
        b.metadata(7, 2),
        b.exception("throttlingException", "later"),
    )
    assert end(lines) == "complete"
    assert contents(lines) == "Done"
    assert lines[-1]["usage"]["prompt_tokens"] == 7


def test_damage_after_message_stop_keeps_the_answer() -> None:
    lines = run(*b.text_stream("Done")[:-1], b"\x00" * 16)
    assert end(lines) == "complete" and lines[-1]["usage"] is None


def test_metadata_may_be_missing_or_cut() -> None:
    whole = b.text_stream("Done")
    assert end(run(*whole[:-1])) == "complete"
    assert end(run(*whole[:-1], whole[-1][:20])) == "complete"


def test_unknown_events_and_block_stops_are_ignored() -> None:
    lines = run(
        b.message_start(),
        b.event("somethingNew", {"x": 1}),
        b.event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"citation": {"x": 1}}}),
        *b.text_stream("Hi")[1:],
    )
    assert end(lines) == "complete" and contents(lines) == "Hi"


def test_server_side_tools_are_not_client_tool_calls() -> None:
    server = b.event(
        "contentBlockStart",
        {
            "contentBlockIndex": 0,
            "start": {"toolUse": {"toolUseId": "srv_1", "name": "web", "type": "server_tool_use"}},
        },
    )
    lines = run(
        b.message_start(),
        server,
        b.tool_delta(0, '{"q": "x"}'),
        b.block_stop(0),
        b.tool_start(1, "tooluse_c", "get_weather"),
        b.tool_delta(1, "{}"),
        b.message_stop("tool_use"),
    )
    calls = [c for line in lines[:-1] for c in line["choices"][0]["delta"].get("tool_calls", [])]
    assert calls[0] == {
        "index": 0,
        "id": "tooluse_c",
        "type": "function",
        "function": {"name": "get_weather", "arguments": ""},
    }
    assert json.loads("".join(c["function"]["arguments"] for c in calls)) == {}


def test_empty_body_and_start_only() -> None:
    assert end(run()) == {"type": "upstream_error", "code": "upstream_empty"}
    assert end(run(b.message_start())) == {"type": "upstream_error", "code": "stream_incomplete"}


def test_nothing_is_read_after_a_failure() -> None:
    translator = BedrockStreamTranslator(counting_ids())
    translator.feed(b.message_start() + b.exception("throttlingException", "slow"))
    assert translator.failure is not None
    assert translator.feed(b.text_delta("late")) == []
