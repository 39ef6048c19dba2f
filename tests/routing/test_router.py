"""sluice/routing/router.py as tables, over a fake transport (no sockets) with the real
adapter registry and the real OpenAI-compatible translator fed OpenAI SSE bytes:
failover order, the breaker, resends, stopped calls, timeouts, weighted order and the
scrubbing of credentials. Whole answers: test_router_complete.py."""

from __future__ import annotations

import asyncio
import contextlib

import msgspec
import pytest

from sluice.core.connection import Timeouts
from sluice.errors import ApiError, ServiceUnavailableError, UpstreamError
from sluice.routing.attempts import AttemptRecord, InFlight
from sluice.routing.breaker import State
from sluice.routing.caller import first_event_timeout
from sluice.routing.catalog import CatalogModel
from sluice.transport.failures import RequestNotSentError
from tests.support.fake_openai import completion
from tests.support.fake_transport import (
    Answer,
    FakeClock,
    FakeTransport,
    ScriptedResponse,
    connection,
)
from tests.support.routing import (
    MODEL,
    ROLE,
    failing,
    make_router,
    ok,
    plan,
    request,
    rows,
    setup,
)

A, B = connection("a"), connection("b")
ERROR_EVENT = b'data: {"error":{"message":"busy"}}\n\n'
CONNECT_FAILED = "Could not connect."
CONNECT_ERROR = UpstreamError(CONNECT_FAILED, code="upstream_connect_failed")
HTTP_ERROR = "upstream_error upstream_http_error"


async def test_the_primary_serves_when_it_opens() -> None:
    transport, _, router = setup({"a": [ok()]})
    records: list[AttemptRecord] = []
    stream = await router.open_stream(request(), plan(A, B), records)
    assert (stream.attempt.position, stream.attempt.target.connection.id) == ("primary", "a")
    assert rows(records) == ["primary a served"]
    assert transport.sent_to() == [("a", False)]
    assert transport.sent[0].body["model"] == "native-a"


@pytest.mark.parametrize(
    ("answer", "outcome", "closed"),
    [
        (failing(500), "upstream_error upstream_http_error", [True]),
        (failing(429, **{"retry-after": "2"}), "rate_limit_error upstream_rate_limited", [True]),
        (failing(503), "service_unavailable upstream_overloaded", [True]),
        (failing(401), "upstream_error upstream_authentication_failed", [True]),
        (ScriptedResponse([ROLE]), "upstream_error stream_incomplete", [True]),
        (ScriptedResponse([ROLE, ERROR_EVENT]), "upstream_error upstream_stream_error", [True]),
        (ScriptedResponse([]), "upstream_error upstream_empty", [True]),
        (CONNECT_ERROR, "upstream_error upstream_connect_failed", []),
    ],
    ids=["500", "429", "503", "401", "role-then-end", "error-before-content", "empty", "connect"],
)
async def test_a_primary_that_fails_before_its_first_event_is_failed_over(
    answer: Answer, outcome: str, closed: list[bool]
) -> None:
    transport, _, router = setup({"a": [answer], "b": [ok()]})
    records: list[AttemptRecord] = []
    stream = await router.open_stream(request(), plan(A, B), records)
    assert stream.attempt.target.connection.id == "b"
    assert rows(records) == [f"primary a {outcome}", "standby_a b served"]
    assert [r.closed for r in transport.responses] == [*closed, False]


@pytest.mark.parametrize(
    ("answers", "raised", "expected"),
    [
        (
            {"a": [failing(500, "first")], "b": [failing(502, "second")]},
            ("upstream_http_error", "The provider failed (HTTP 502): second"),
            [f"primary a {HTTP_ERROR}", f"standby_a b {HTTP_ERROR}"],
        ),
        (
            {"a": [failing(400, "bad tool", code="invalid_tool")], "b": [ok()]},
            ("invalid_tool", "bad tool"),
            ["primary a invalid_request_error invalid_tool"],
        ),
    ],
    ids=["all-fail-last-raised", "400-raised-at-once"],
)
async def test_errors_that_end_the_call(
    answers: dict[str, list[Answer]], raised: tuple[str, str], expected: list[str]
) -> None:
    transport, _, router = setup(answers)
    records: list[AttemptRecord] = []
    with pytest.raises(ApiError) as caught:
        await router.open_stream(request(), plan(A, B), records)
    assert (caught.value.code, caught.value.message) == raised
    assert rows(records) == expected
    assert len(transport.sent) == len(expected)


async def test_an_open_circuit_is_skipped_and_recorded() -> None:
    transport, _, router = setup({"a": [failing(500)], "b": [ok(), ok()]}, threshold=1)
    await router.open_stream(request(), plan(A, B), [])
    records: list[AttemptRecord] = []
    await router.open_stream(request(), plan(A, B), records)
    assert rows(records) == ["primary a skipped", "standby_a b served"]
    assert [s.conn for s in transport.sent] == ["a", "b", "b"]


@pytest.mark.parametrize(
    ("retry_a", "retry_b", "later", "wait"), [("7", "3", 1.0, 2.0), ("10", "20", 4.0, 6.0)]
)
async def test_every_circuit_open_is_cooling_down(
    retry_a: str, retry_b: str, later: float, wait: float
) -> None:
    answers: dict[str, list[Answer]] = {
        "a": [failing(429, **{"retry-after": retry_a})],
        "b": [failing(429, **{"retry-after": retry_b})],
    }
    transport, clock, router = setup(answers)
    with pytest.raises(ApiError):
        await router.open_stream(request(), plan(A, B), [])
    clock.advance(later)
    records: list[AttemptRecord] = []
    with pytest.raises(ServiceUnavailableError) as caught:
        await router.open_stream(request(), plan(A, B), records)
    err = caught.value
    assert (err.code, err.http_status, err.retry_after) == ("connections_cooling_down", 503, wait)
    assert err.message == (
        "Every connection that serves 'test/m' is cooling down after repeated failures."
    )
    assert rows(records) == ["primary a skipped", "standby_a b skipped"]
    assert len(transport.sent) == 2


@pytest.mark.parametrize(
    ("probe", "state", "allowed"),
    [
        (ok(), State.CLOSED, True),
        (failing(500), State.OPEN, False),
        (failing(400), State.HALF_OPEN, True),  # no verdict on the connection: released
        (asyncio.CancelledError(), State.HALF_OPEN, True),
    ],
    ids=["success-closes", "failure-reopens", "400-releases", "cancel-releases"],
)
async def test_the_half_open_probe(probe: Answer, state: State, allowed: bool) -> None:
    _, clock, router = setup({"a": [failing(500), probe]}, threshold=1, cooldown=10.0)
    with pytest.raises(ApiError):
        await router.open_stream(request(), plan(A), [])
    clock.advance(10.0)
    with contextlib.suppress(ApiError, asyncio.CancelledError):
        await router.open_stream(request(), plan(A), [])
    assert router.breaker.state(("a", MODEL.id), clock()) is state
    assert router.breaker.allow(("a", MODEL.id), clock()) is allowed


NOT_SENT = "upstream_error upstream_connection_closed"


@pytest.mark.parametrize(
    ("answers", "sent", "expected"),
    [
        (
            {"a": [RequestNotSentError(), ok()]},
            [("a", False), ("a", True)],
            [f"primary a {NOT_SENT}", "primary a served"],
        ),
        (
            {"a": [RequestNotSentError(), RequestNotSentError()], "b": [ok()]},
            [("a", False), ("a", True), ("b", False)],
            [f"primary a {NOT_SENT}", f"primary a {NOT_SENT}", "standby_a b served"],
        ),
        (
            {"a": [UpstreamError(CONNECT_FAILED, code="upstream_connect_failed")], "b": [ok()]},
            [("a", False), ("b", False)],
            ["primary a upstream_error upstream_connect_failed", "standby_a b served"],
        ),
    ],
    ids=["resent-once-fresh", "not-resent-twice", "other-errors-not-resent"],
)
async def test_a_request_not_sent_goes_out_once_more_fresh(
    answers: dict[str, list[Answer]], sent: list[tuple[str, bool]], expected: list[str]
) -> None:
    transport, _, router = setup(answers)
    records: list[AttemptRecord] = []
    await router.open_stream(request(), plan(A, B), records)
    assert transport.sent_to() == sent
    assert rows(records) == expected


async def test_a_request_not_sent_counts_for_the_breaker() -> None:
    """As docs/security.md says: the try is a failure for the breaker, so a threshold of
    one opens the circuit on it and the fresh resend is skipped."""
    transport, _, router = setup({"a": [RequestNotSentError(), ok()]}, threshold=1)
    records: list[AttemptRecord] = []
    with pytest.raises(UpstreamError) as caught:
        await router.open_stream(request(), plan(A), records)
    assert caught.value.code == "upstream_connection_closed"
    assert transport.sent_to() == [("a", False)]
    assert rows(records) == [f"primary a {NOT_SENT}", "primary a skipped"]


@pytest.mark.parametrize(
    ("stopped", "sent", "served"), [(False, ["a", "b"], "b"), (True, ["a"], None)]
)
async def test_a_stopped_call_ends_failover_after_its_attempt(
    stopped: bool, sent: list[str], served: str | None
) -> None:
    body = ScriptedResponse.json(completion("Hello"))
    transport, _, router = setup({"a": [failing(500)], "b": [body]})
    in_flight = InFlight()
    in_flight.stopped = stopped
    result: str | None = None
    try:
        done = await router.complete(request(stream=False), plan(A, B), [], in_flight)
        result = done.attempt.target.connection.id
    except UpstreamError as exc:
        assert exc.code == "upstream_http_error"
    assert result == served
    assert [s.conn for s in transport.sent] == sent
    assert in_flight.attempt is not None
    assert in_flight.attempt.target.connection.id == sent[-1]


SAID_NOTHING = "The provider said nothing within 5 s."


@pytest.mark.parametrize(
    ("timeouts", "code", "message"),
    [
        (Timeouts(first_event=5), "first_event_timeout", SAID_NOTHING),
        (Timeouts(first_event=5, total=5), "first_event_timeout", SAID_NOTHING),
        (
            Timeouts(first_event=5, total=2.5),
            "deadline_exceeded",
            "The provider did not finish within 2.5 s.",
        ),
    ],
    ids=["first-event", "equal", "total-shorter"],
)
def test_first_event_timeout_names_the_shorter_bound(
    timeouts: Timeouts, code: str, message: str
) -> None:
    err = first_event_timeout(timeouts, "said nothing")
    assert (err.code, err.message, err.http_status, err.failover) == (code, message, 504, True)


def hang() -> asyncio.Event:
    return asyncio.Event()


SENT_NOTHING = "The provider sent nothing within 0.02 s."
NOT_FINISHED = "The provider did not finish within 0.02 s."
DID_NOT_ANSWER = "The provider did not answer within 0.02 s."
QUICK_FIRST = Timeouts(first_event=0.02)


@pytest.mark.parametrize(
    ("stream", "timeouts", "answer", "code", "message"),
    [
        (True, Timeouts(first_event=0.02), hang(), "first_event_timeout", SENT_NOTHING),
        (True, Timeouts(total=0.02), hang(), "deadline_exceeded", NOT_FINISHED),
        (True, QUICK_FIRST, ScriptedResponse([ROLE, hang()]), "first_event_timeout", SENT_NOTHING),
        (False, QUICK_FIRST, hang(), "first_event_timeout", DID_NOT_ANSWER),
        (False, Timeouts(total=0.02), hang(), "deadline_exceeded", NOT_FINISHED),
    ],
    ids=["stream-first", "stream-total", "stream-role-then-silence", "whole-first", "whole-total"],
)
async def test_a_silent_attempt_times_out_and_is_failed_over(
    stream: bool, timeouts: Timeouts, answer: Answer, code: str, message: str
) -> None:
    fallback = ok() if stream else ScriptedResponse.json(completion("Hello"))
    transport, _, router = setup({"a": [answer], "b": [fallback]})
    slow = connection("a", timeouts=timeouts)
    records: list[AttemptRecord] = []
    if stream:
        await router.open_stream(request(), plan(slow, B), records)
    else:
        await router.complete(request(stream=False), plan(slow, B), records)
    assert rows(records) == [f"primary a request_timeout {code}", "standby_a b served"]
    assert records[0].message == message
    opened = isinstance(answer, ScriptedResponse)
    assert [r.closed for r in transport.responses] == ([True, False] if opened else [False])


WEIGHTED = msgspec.structs.replace(MODEL, weighted=True)
ONE_POSITION = ["primary"] * 3


@pytest.mark.parametrize(
    ("weights", "model", "positions", "order"),
    [  # Random(0) draws 0.8444, 0.7580, 0.4206; each key is u ** (1 / weight), largest first
        ((1, 1, 1), WEIGHTED, ONE_POSITION, ["a", "b", "c"]),
        ((1, 1, 8), WEIGHTED, ONE_POSITION, ["c", "a", "b"]),  # 0.4206 ** (1/8) = 0.897
        ((0.1, 1, 1), WEIGHTED, ONE_POSITION, ["b", "c", "a"]),  # 0.8444 ** 10 = 0.183
        ((1, 1, 8), MODEL, ONE_POSITION, ["a", "b", "c"]),  # not weighted: as configured
        ((1, 8, 1), WEIGHTED, ["primary", "primary", "standby_a"], ["b", "a", "c"]),
    ],
    ids=["equal", "heavy-last", "light-first", "ordered-model", "positions-apart"],
)
async def test_weighted_order_is_drawn_and_walked(
    weights: tuple[float, ...], model: CatalogModel, positions: list[str], order: list[str]
) -> None:
    conns = [connection(name, weight=w) for name, w in zip("abc", weights, strict=True)]
    answers: dict[str, list[Answer]] = {name: [failing(500)] for name in order[:-1]}
    answers[order[-1]] = [ok()]
    transport, _, router = setup(answers)
    the_plan = plan(*conns, positions=positions, model=model)
    drawn = make_router(FakeTransport(), FakeClock()).ordered(the_plan)  # its own Random(0)
    assert [a.target.connection.id for a in drawn] == order
    await router.open_stream(request(), the_plan, [])
    assert [s.conn for s in transport.sent] == order


PLAIN_KEY = "plainsecretvalue99"  # nothing credential-like: only known as the key
HTTP_500 = "The provider failed (HTTP 500): "
HTTP_CODE = "upstream_http_error"
SIGNING = "AWSSIGNINGSECRET"


@pytest.mark.parametrize(
    ("status", "message", "code", "signing", "expected"),
    [
        (500, f"bad key {PLAIN_KEY}", None, (), (HTTP_500 + "bad key [redacted]", HTTP_CODE)),
        (500, f"BAD {PLAIN_KEY.upper()}", None, (), (HTTP_500 + "BAD [redacted]", HTTP_CODE)),
        (
            500,
            "signed AWSSIGNINGSECRET",
            None,
            (SIGNING,),
            (HTTP_500 + "signed [redacted]", HTTP_CODE),
        ),
        (500, "sent Bearer abc.def", None, (), (HTTP_500 + "sent [redacted]", HTTP_CODE)),
        (400, f"no {PLAIN_KEY}", f"key_{PLAIN_KEY}", (), ("no [redacted]", "key_[redacted]")),
    ],
    ids=["own-key", "own-key-upper", "signing-secret", "bearer-like", "400-code-too"],
)
async def test_errors_are_scrubbed_of_credentials(
    status: int, message: str, code: str | None, signing: tuple[str, ...], expected: tuple[str, str]
) -> None:
    transport, _, router = setup({"a": [failing(status, message, code)]}, signing=signing)
    records: list[AttemptRecord] = []
    with pytest.raises(ApiError) as caught:
        await router.open_stream(request(), plan(connection("a", key=PLAIN_KEY)), records)
    assert (caught.value.message, caught.value.code) == expected
    assert (records[0].message, records[0].code) == expected
    assert transport.sent[0].headers["authorization"] == f"Bearer {PLAIN_KEY}"
