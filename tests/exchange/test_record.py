"""sluice/exchange/record.py and the ExchangeState reads it uses (state.py), as tables
over states built by hand: a real OpenAI translator fed recorded bytes, or a parsed
whole answer. Status, usage (reported or estimated), the charge and its cap, timing,
errors and which attempt served.

Prices: 2 USD/M prompt, 8 USD/M completion tokens: a charge in nano-USD is
``2_000 * prompt + 8_000 * completion``. The request (``Hi``) is estimated at 8 prompt
tokens (3 + 4 + ceil(2 / 4))."""

from __future__ import annotations

from typing import Any

import pytest

from sluice.core.connection import Target
from sluice.core.usage import TokenUsage
from sluice.errors import (
    ApiError,
    GuardrailBlockedError,
    RequestTimeoutError,
    ShuttingDownError,
    UpstreamError,
)
from sluice.exchange.record import request_record
from sluice.exchange.state import ExchangeState
from sluice.guardrails.rule import Note
from sluice.metering.meter import Ticket
from sluice.providers.base import ParsedCompletion
from sluice.providers.registry import AdapterRegistry
from sluice.routing.attempts import AttemptRecord
from sluice.routing.plan import Attempt, Plan
from sluice.storage.base import REQUEST_STATUSES, RequestRecord
from sluice.wire.chunks import (
    CompletionChoice,
    ResponseFunctionCall,
    ResponseMessage,
    ResponseToolCall,
)
from tests.exchange.harness import FIXED_TIME, PRINCIPAL
from tests.support.fake_openai import chunk
from tests.support.fake_transport import connection, events, fixture
from tests.support.routing import MODEL, request

REQ = request()
SERVED = Attempt("standby_a", Target(MODEL.id, "native-b", connection("b")), MODEL)
PRIMARY = Attempt("primary", Target(MODEL.id, "native-a", connection("a")), MODEL)
PLAN = Plan("fast", "fast", (PRIMARY, SERVED))
TRIED = AttemptRecord(
    "primary",
    MODEL.id,
    "a",
    "openai-compatible",
    "upstream_error",
    12.5,
    "upstream_http_error",
    "boom",
)
HOLD = 826_000
HELD_USD = 826e-6
TEXT = [fixture("text")]  # 24 prompt, 5 completion tokens reported; 30 chars
NO_USAGE = [e for e in events(fixture("text")) if b'"choices":[]' not in e]  # no usage chunk
CUT = [fixture("cut")]  # 18 chars, no usage
EARLY_USAGE = [  # a count from the stream's start (completion 1, a cost), then 20 chars
    chunk(role="assistant", content=""),
    chunk(usage={"prompt_tokens": 24, "completion_tokens": 1, "cost": 0.5}, choices=False),
    chunk(content="x" * 20),
]


def build(
    *,
    steps: list[bytes] | None = None,
    whole: ParsedCompletion | None = None,
    served: bool = True,
    hold: int | None = HOLD,
    completed: bool = False,
    sent: bool = False,
    error: ApiError | None = None,
    disconnect: str | None = None,
    first_token: float | None = None,
) -> ExchangeState:
    state = ExchangeState(
        REQ if whole is None else request(stream=False),
        PRINCIPAL,
        request_id="req_1",
        created=FIXED_TIME,
        started=100.0,
    )
    state.plan = PLAN
    state.attempts = [TRIED]
    if served:
        state.serve(SERVED)
    if hold is not None:
        state.ticket = Ticket("hold_1", "acct_1", "key_1", "req_1", hold)
    if steps is not None:
        translator = AdapterRegistry(lambda p: f"{p}_1").adapter("openai-compatible").stream(REQ)
        for data in steps:
            translator.feed(data)
        state.translator = translator
    state.completion = whole
    state.completed, state.sent, state.error = completed, sent, error
    state.disconnect, state.first_token = disconnect, first_token
    return state


def record(state: ExchangeState, *, duration: float = 1.5, http_status: int = 200) -> RequestRecord:
    tokens = state.tokens()
    charged = state.charge(tokens)
    return request_record(
        state,
        http_status=http_status,
        duration=duration,
        tokens=tokens,
        charged=charged,
        front_door="chat",
    )


FULL: dict[str, Any] = {"steps": TEXT, "completed": True, "sent": True}
CUT_ERR = UpstreamError("The response stream ended before it completed.", code="stream_incomplete")
GONE = UpstreamError("The response stream ended before it completed.", code="upstream_disconnected")
IN_STREAM = UpstreamError("The provider reported an error.", code="upstream_stream_error")
HTTP_500 = UpstreamError("The provider failed (HTTP 500): boom", code="upstream_http_error")
BLOCKED = GuardrailBlockedError("Blocked by guardrail 'no-x'.")
STALLED = RequestTimeoutError(
    "The provider sent nothing for 5 s.", code="stream_stalled", http_status=504
)


@pytest.mark.parametrize(
    ("state", "status", "finish"),
    [
        (dict(steps=TEXT, completed=True, sent=True), "complete", "stop"),
        (dict(steps=[fixture("length")], completed=True, sent=True), "truncated", "length"),
        (dict(served=False, error=HTTP_500), "error", None),
        (dict(steps=CUT, sent=True, error=CUT_ERR), "incomplete", None),
        (dict(steps=CUT, sent=True, error=GONE), "incomplete", None),
        (dict(steps=CUT, sent=False, error=CUT_ERR), "error", None),
        (dict(steps=CUT, sent=True, error=IN_STREAM), "error", None),
        (dict(steps=TEXT, sent=True, error=BLOCKED), "blocked", "stop"),
        (dict(steps=CUT, sent=True, error=ShuttingDownError()), "shutdown", None),
        (dict(steps=CUT, sent=True, disconnect="cancel"), "cancelled", None),
        (dict(steps=CUT, sent=True, disconnect="drain", error=STALLED), "cancelled", None),
    ],
    ids=[
        "complete",
        "truncated",
        "error-before-serving",
        "incomplete-cut",
        "incomplete-disconnected",
        "cut-before-sending",
        "error-in-stream",
        "blocked",
        "shutdown",
        "cancelled",
        "drain-that-stalled",
    ],
)
def test_status_finish_and_error_fields(
    state: dict[str, Any], status: str, finish: str | None
) -> None:
    rec = record(build(**state))
    assert rec.status in REQUEST_STATUSES  # the listing's status filter knows every one
    assert (rec.status, rec.finish_reason, rec.disconnect) == (
        status,
        finish,
        state.get("disconnect"),
    )
    err: ApiError | None = state.get("error")
    expected = (None, None, None) if err is None else (err.type, err.code, err.message)
    assert (rec.error_type, rec.error_code, rec.error_message) == expected


def whole_answer(
    content: str, usage: TokenUsage | None, arguments: str | None = None
) -> ParsedCompletion:
    message = ResponseMessage(content=content)
    if arguments is not None:
        message.tool_calls = [
            ResponseToolCall(
                id="call_1", function=ResponseFunctionCall(name="f", arguments=arguments)
            )
        ]
    return ParsedCompletion([CompletionChoice(0, message, "stop")], usage)


@pytest.mark.parametrize(
    ("state", "tokens"),
    [
        (dict(served=False), None),
        (dict(), None),  # served, but nothing read yet
        (dict(steps=TEXT, completed=True), TokenUsage(24, 5)),
        (dict(steps=NO_USAGE, completed=True), TokenUsage(8, 8, estimated=True)),
        (dict(steps=CUT), TokenUsage(8, 5, estimated=True)),
        (dict(steps=EARLY_USAGE), TokenUsage(24, 5, estimated=True)),  # streamed beats reported
        (dict(steps=EARLY_USAGE, completed=True), TokenUsage(24, 1, provider_cost=0.5)),
        (dict(steps=EARLY_USAGE[:2]), TokenUsage(24, 1, provider_cost=0.5)),  # nothing more yet
        (dict(whole=whole_answer("Hello", TokenUsage(10, 5)), completed=True), TokenUsage(10, 5)),
        (
            dict(whole=whole_answer("Hello", None, '{"a": 1}'), completed=True),
            TokenUsage(8, 4, estimated=True),
        ),
    ],
    ids=[
        "no-attempt",
        "nothing-read",
        "reported",
        "estimated",
        "cut",
        "cut-beyond-reported",
        "completed-keeps-reported",
        "reported-covers-streamed",
        "whole-reported",
        "whole-estimated",
    ],
)
def test_tokens_reported_or_estimated(state: dict[str, Any], tokens: TokenUsage | None) -> None:
    assert build(**state).tokens() == tokens


@pytest.mark.parametrize(
    ("state", "money", "charge"),
    [  # prompt, completion, estimated, cost, price source, held, charged (USD); nano-USD
        (FULL, (24, 5, False, 8.8e-05, "list", HELD_USD, 8.8e-05), 88_000),
        ({**FULL, "hold": 50_000}, (24, 5, False, 8.8e-05, "list", 5e-05, 5e-05), 50_000),
        ({**FULL, "hold": None}, (24, 5, False, 8.8e-05, "list", None, None), 88_000),
        (dict(steps=NO_USAGE, completed=True), (8, 8, True, None, None, HELD_USD, 8e-05), 80_000),
        (dict(steps=CUT, error=CUT_ERR), (8, 5, True, 5.6e-05, "list", HELD_USD, 5.6e-05), 56_000),
        (
            dict(steps=EARLY_USAGE, completed=True),
            (24, 1, False, 0.5, "provider", HELD_USD, HELD_USD),
            HOLD,
        ),
        (dict(served=False, error=HTTP_500), (0, 0, False, None, None, HELD_USD, 0.0), 0),
    ],
    ids=[
        "reported",
        "capped-by-hold",
        "unmetered",
        "estimated-when-finished-unpriced",
        "cut-estimate-priced",
        "provider-cost-capped",
        "nothing-served",
    ],
)
def test_usage_cost_and_charge(state: dict[str, Any], money: tuple[Any, ...], charge: int) -> None:
    built = build(**state)
    rec = record(built)
    got = (rec.prompt_tokens, rec.completion_tokens, rec.usage_estimated, rec.cost)
    assert (*got, rec.price_source, rec.credits_held, rec.credits_charged) == money
    assert built.charge(built.tokens()) == charge


@pytest.mark.parametrize(
    ("first_token", "duration", "steps", "timing"),
    [
        (0.5, 1.5, TEXT, (500.0, 1500.0, 5.0)),
        (0.2, 0.9, TEXT, (200.0, 900.0, 7.14)),  # 5 tokens in 0.7 s
        (0.5, 0.5, TEXT, (500.0, 500.0, None)),  # no time generating
        (0.5, 1.5, [chunk(role="assistant", content="")], (500.0, 1500.0, None)),  # no tokens
        (None, 1.5, TEXT, (None, 1500.0, None)),  # nothing arrived
    ],
)
def test_ttft_and_tokens_per_second(
    first_token: float | None, duration: float, steps: list[bytes], timing: tuple[Any, ...]
) -> None:
    rec = record(build(steps=steps, completed=True, first_token=first_token), duration=duration)
    assert (rec.ttft_ms, rec.duration_ms, rec.tokens_per_second) == timing


def test_a_whole_answer_has_a_time_to_answer_and_no_tokens_per_second() -> None:
    """It arrives at once: the milliseconds after it are sending, not generating."""
    state = build(whole=whole_answer("Hello", TokenUsage(10, 5)), completed=True, first_token=0.5)
    rec = record(state, duration=0.5003)
    assert (rec.ttft_ms, rec.tokens_per_second) == (500.0, None)


def test_identity_attempts_and_notes() -> None:
    state = build(steps=TEXT, completed=True, sent=True)
    state.guardrails.append(Note("no-x", "output", "log", "matched"))
    rec = record(state, http_status=200)
    assert (rec.id, rec.account_id, rec.key_id, rec.created_at) == (
        "req_1",
        "acct_1",
        "key_1",
        FIXED_TIME,
    )
    assert (rec.requested_model, rec.stream, rec.http_status) == ("test/m", True, 200)
    assert (rec.served_model, rec.route, rec.route_name, rec.provider, rec.connection) == (
        "test/m",
        "standby_a",
        "fast",
        "openai-compatible",
        "b",
    )
    assert rec.attempts == [
        {
            "position": "primary",
            "model": "test/m",
            "connection": "a",
            "provider": "openai-compatible",
            "outcome": "upstream_error",
            "latency_ms": 12.5,
            "code": "upstream_http_error",
            "message": "boom",
        }
    ]
    assert rec.guardrails == [
        {"name": "no-x", "stage": "output", "action": "log", "outcome": "matched"}
    ]
    unserved = record(build(served=False, error=HTTP_500), http_status=502)
    assert (unserved.served_model, unserved.route, unserved.provider, unserved.connection) == (
        None,
        None,
        None,
        None,
    )
    assert (unserved.route_name, unserved.http_status) == ("fast", 502)
    assert (unserved.error_type, unserved.error_code, unserved.error_message) == (
        "upstream_error",
        "upstream_http_error",
        "The provider failed (HTTP 500): boom",
    )
    assert (unserved.status, unserved.cost, unserved.ttft_ms) == ("error", None, None)


@pytest.mark.parametrize(
    ("state", "calls", "repairs"),
    [
        (
            dict(steps=[fixture("tool_call_fragments")]),
            [{"choice": 0, "index": 0, "name": "get_weather", "arguments_valid_json": True}],
            [],
        ),
        (
            dict(whole=whole_answer("", None, '{"city": ')),
            [{"choice": 0, "index": 0, "name": "f", "arguments_valid_json": False}],
            [],
        ),
        (
            dict(whole=whole_answer("", None, "")),
            [{"choice": 0, "index": 0, "name": "f", "arguments_valid_json": True}],
            [],
        ),
        (
            dict(steps=[chunk(content="x", index=1), chunk(content="y")]),
            [],
            [{"kind": "choice_dropped", "choice": 1, "upstream_index": None, "index": None}],
        ),
    ],
    ids=["streamed-call", "whole-bad-json", "whole-empty-arguments", "dropped-choice"],
)
def test_tool_calls_and_repairs(
    state: dict[str, Any], calls: list[dict[str, object]], repairs: list[dict[str, object]]
) -> None:
    rec = record(build(**state))
    assert (rec.tool_calls, rec.repairs) == (calls, repairs)
