"""One call's attempts (pure): request bytes, deadlines, error answers, retry decisions."""

from __future__ import annotations

import json

import msgspec
import pytest

from sluice.client.call import ChatCall
from sluice.client.events import ErrorInfo
from sluice.client.policy import RetryPolicy, Timeouts
from sluice.client.request import ChatSpec, error_from_response, not_an_event_stream, prepare
from tests.client.test_policy import RecordingUniform
from tests.support.fake_openai import DONE, chunk

SPEC = ChatSpec(
    base_url="http://gw.test/v1/",
    api_key="sk-test",
    model="big/model",
    messages=[{"role": "user", "content": "hi"}],
    fields={"max_tokens": 5, "stream": False},
    retry_model="small/model",
)


def test_request_forces_stream_asks_usage_and_switches_model_for_retries() -> None:
    first = prepare(SPEC, 1)
    assert first.url == "http://gw.test/v1/chat/completions"
    assert json.loads(first.body) == {
        "model": "big/model",
        "messages": [{"role": "user", "content": "hi"}],
        "stream_options": {"include_usage": True},
        "max_tokens": 5,
        "stream": True,
    }
    assert ("Authorization", "Bearer sk-test") in first.headers
    assert ("Accept", "text/event-stream") in first.headers
    second = prepare(SPEC, 2)
    assert (second.model, json.loads(second.body)["model"]) == ("small/model", "small/model")
    no_retry_model = ChatSpec(base_url="http://x/v1", api_key=None, model="m", messages=[])
    assert prepare(no_retry_model, 3).model == "m"
    assert not any(name == "Authorization" for name, _ in prepare(no_retry_model, 1).headers)


def test_caller_may_turn_usage_off() -> None:
    spec = ChatSpec(
        base_url="http://x/v1",
        api_key=None,
        model="m",
        messages=[],
        fields={"stream_options": {"include_usage": False}},
    )
    assert json.loads(prepare(spec, 1).body)["stream_options"] == {"include_usage": False}


@pytest.mark.parametrize(
    ("status", "body", "expected"),
    [
        pytest.param(
            401,
            b'{"error": {"message": "Invalid API key.", "type": "authentication_error",'
            b' "code": "invalid_api_key", "param": null}}',
            ErrorInfo("authentication_error", "Invalid API key.", "invalid_api_key", 401),
            id="sluice-envelope",
        ),
        pytest.param(
            503,
            b'{"error": {"message": "checker down", "type": "guardrail_error",'
            b' "code": "guardrail_unavailable"}}',
            ErrorInfo("guardrail_error", "checker down", "guardrail_unavailable", 503),
            id="guardrail",
        ),
        pytest.param(
            429,
            b'{"error": "slow down"}',
            ErrorInfo("rate_limit_error", "slow down", None, 429),
            id="string-error",
        ),
        pytest.param(
            502,
            b"<html>Bad Gateway</html>",
            ErrorInfo("upstream_error", "<html>Bad Gateway</html>", None, 502),
            id="proxy-html",
        ),
        pytest.param(
            500, b"", ErrorInfo("http_error", "HTTP 500", None, 500), id="empty-unknown-status"
        ),
        pytest.param(
            404,
            b'{"error": {"message": "no such model"}}',
            ErrorInfo("not_found", "no such model", None, 404),
            id="typeless",
        ),
    ],
)
def test_error_from_response(status: int, body: bytes, expected: ErrorInfo) -> None:
    assert error_from_response(status, body, None, 0.0) == expected


def test_error_from_response_reads_retry_after() -> None:
    error = error_from_response(429, b"{}", "12", 0.0)
    assert (error.type, error.retry_after) == ("rate_limit_error", 12.0)


@pytest.mark.parametrize(
    ("content_type", "ok"),
    [
        ("text/event-stream", True),
        ("text/event-stream; charset=utf-8", True),
        ("Text/Event-Stream", True),
        ("application/json", False),
        (None, False),
    ],
)
def test_event_stream_content_type(content_type: str | None, ok: bool) -> None:
    assert (not_an_event_stream(content_type) is None) is ok


def call(timeouts: Timeouts, retry: RetryPolicy | None = None, spec: ChatSpec = SPEC) -> ChatCall:
    return ChatCall(spec, timeouts, retry or RetryPolicy(), started=100.0)


def test_deadlines_first_event_then_idle_capped_by_total() -> None:
    c = call(Timeouts(first_event=5.0, idle=2.0, total=20.0))
    c.begin(103.0)
    assert c.deadline() == 108.0  # the attempt's start + first_event
    c.opened("text/event-stream", None)
    c.feed(b": keep-alive\n\n", 107.0)
    assert c.deadline() == 108.0  # comments reset nothing
    c.feed(chunk(role="assistant", content=""), 107.5)
    assert c.deadline() == 109.5  # any event: idle from there
    c.feed(chunk(content="x"), 119.0)
    assert c.deadline() == 120.0  # the total deadline, from the call's start
    unlimited = call(Timeouts(first_event=None, idle=None, total=None))
    unlimited.begin(100.0)
    assert unlimited.deadline() is None


@pytest.mark.parametrize(
    ("feed_at", "timed_out_at", "code"),
    [
        pytest.param(None, 105.0, "first_event_timeout", id="first"),
        pytest.param(101.0, 103.0, "idle_timeout", id="idle"),
        pytest.param(101.0, 120.0, "deadline_exceeded", id="total"),
    ],
)
def test_timeouts_are_errors_named_by_which_limit(
    feed_at: float | None, timed_out_at: float, code: str
) -> None:
    c = call(Timeouts(first_event=5.0, idle=2.0, total=20.0))
    c.begin(100.0)
    c.opened("text/event-stream", None)
    if feed_at is not None:
        c.feed(chunk(content="partial"), feed_at)
    c.timed_out(timed_out_at)
    result = c.end(timed_out_at)
    assert result.state == "error"
    assert result.error is not None
    assert (result.error.type, result.error.code) == ("request_timeout", code)
    assert result.text == ("partial" if feed_at else "")


def test_connection_failure_before_the_head_is_an_error_after_it_incomplete() -> None:
    c = call(Timeouts())
    c.begin(100.0)
    c.broken("refused")
    refused = c.end(100.0)
    assert refused.state == "error"
    assert refused.error == ErrorInfo("connection_error", "refused", "connection_failed")
    c.begin(101.0)
    c.opened("text/event-stream", "req_1")
    c.feed(chunk(content="par"), 101.5)
    c.broken("reset")
    cut = c.end(102.0)
    assert (cut.state, cut.text, cut.attempts, cut.request_id) == ("incomplete", "par", 2, "req_1")
    assert cut.error == ErrorInfo("connection_error", "reset", "connection_failed")


def test_retry_decision_before_and_after_content() -> None:
    uniform = RecordingUniform(1.0)
    same_model = msgspec.structs.replace(SPEC, retry_model=None)
    c = call(Timeouts(), RetryPolicy(max_attempts=3, base_delay=1.0), same_model)
    c.begin(100.0)
    c.http_error(503, b"", {"Retry-After": "2"}.get, 0.0)
    failed = c.end(100.1)
    assert failed.state == "error"
    assert c.retry_delay(failed, uniform) == 2.0  # Retry-After over the 1 s jitter bound
    c.begin(102.0)
    c.opened("text/event-stream", None)
    c.feed(chunk(content="shown"), 102.5)
    c.feed(b'data: {"error": {"message": "x", "type": "upstream_error"}}\n\n', 103.0)
    after_content = c.end(103.0)
    assert after_content.state == "error" and after_content.text == "shown"
    assert c.retry_delay(after_content, uniform) is None
    assert uniform.calls == [(0.0, 1.0)]


def test_a_retry_on_the_retry_model_ignores_the_failed_models_retry_after() -> None:
    c = call(Timeouts(), RetryPolicy(max_attempts=3, base_delay=1.0))  # retry_model set
    c.begin(100.0)
    c.http_error(429, b"", {"Retry-After": "25"}.get, 0.0)
    assert c.retry_delay(c.end(100.1), RecordingUniform(1.0)) == 1.0  # the backoff only


@pytest.mark.parametrize(("failed_at", "delay"), [(107.0, 2.0), (108.5, None)])
def test_no_retry_that_cannot_start_before_the_total_deadline(
    failed_at: float, delay: float | None
) -> None:
    c = call(Timeouts(total=10.0), RetryPolicy(base_delay=4.0))
    c.begin(100.0)
    no_headers: dict[str, str] = {}
    c.http_error(502, b"", no_headers.get, 0.0)
    assert c.retry_delay(c.end(failed_at), RecordingUniform(0.5)) == delay  # backoff 2 s


def test_a_200_that_is_not_an_event_stream_is_an_error() -> None:
    c = call(Timeouts())
    c.begin(100.0)
    c.opened("application/json", None)
    assert c.finished
    result = c.end(100.0)
    assert result.error is not None and result.error.code == "not_sse"


def test_cancel_reports_incomplete_with_the_partial_answer() -> None:
    c = call(Timeouts())
    c.begin(100.0)
    c.opened("text/event-stream", None)
    c.feed(chunk(content="half") + chunk(finish="stop"), 100.2)
    result = c.cancel(100.3)
    assert (result.state, result.text) == ("incomplete", "half")
    assert result.error is not None and result.error.type == "cancelled"
    c.feed(DONE, 100.4)
    assert c.finished
