"""sluice/exchange/exchange.py, streaming.py and completion.py as tables: one request's
life through the real Services (router over a fake transport, SQLite-backed tenants
and meter, memory limiter, guardrails) and the real chat-completions door, into a
client stream that records its bytes. Each case pins what the client got, the
request-log row queued and the charge settled.

Prices: 2 USD/M prompt, 8 USD/M completion tokens, so a charge in nano-USD is
``2_000 * prompt + 8_000 * completion``. The request (``Say hi``, ``max_tokens`` 100)
is estimated at 9 prompt tokens (3 + 4 + ceil(6 / 4)) and holds
2_000 * 13 + 8_000 * 100 = 826_000 nano-USD (its ceiling: 3 + 4 + 6 bytes)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from sluice.config import GuardrailConfig, LimitsConfig, LimitSpec
from sluice.exchange.ports import ClientGoneError
from sluice.limits.decision import Subject
from sluice.storage.base import RequestRecord
from tests.exchange.harness import PRINCIPAL, RecordingClient, docs, events, harness
from tests.support.fake_openai import completion
from tests.support.fake_transport import Answer, ScriptedResponse, connection, fixture
from tests.support.fake_transport import events as split
from tests.support.routing import ROLE, failing

A, B = connection("a"), connection("b")
BODY: dict[str, Any] = {
    "model": "test/m",
    "messages": [{"role": "user", "content": "Say hi"}],
    "stream": True,
    "max_tokens": 100,
}
WITH_USAGE = {**BODY, "stream_options": {"include_usage": True}}
TEXT = ["role", "content:Server", "content:-sent events", "content: are simple.", "finish:stop"]
HELD = 826_000
Row = tuple[str, int, str | None, str | None, int, int, bool, str | None, str | None]


def text() -> ScriptedResponse:
    """The recorded OpenAI stream: 24 prompt and 5 completion tokens, one event a read."""
    return ScriptedResponse(split(fixture("text")))


def row(rec: RequestRecord) -> Row:
    """status, http, connection, finish, prompt, completion, estimated, error, disconnect"""
    return (
        rec.status,
        rec.http_status,
        rec.connection,
        rec.finish_reason,
        rec.prompt_tokens,
        rec.completion_tokens,
        rec.usage_estimated,
        rec.error_code,
        rec.disconnect,
    )


def tried(rec: RequestRecord) -> list[str]:
    """The logged attempts as ``position connection outcome [code]``."""
    fields = ("position", "connection", "outcome", "code")
    return [" ".join(str(a[f]) for f in fields if a[f] is not None) for a in rec.attempts]


BLOCK_SIMPLE = GuardrailConfig(name="no-simple", stage="output", kind="keywords", words=["simple"])


@pytest.mark.parametrize(
    ("answers", "body", "rules", "sent", "expected", "charged", "attempts"),
    [
        (
            {"a": [text()]},
            WITH_USAGE,
            (),
            [*TEXT, "usage:24/5", "[DONE]"],
            ("complete", 200, "a", "stop", 24, 5, False, None, None),
            88_000,
            ["primary a served"],
        ),
        (
            {"a": [text()]},
            BODY,
            (),
            [*TEXT, "[DONE]"],
            ("complete", 200, "a", "stop", 24, 5, False, None, None),
            88_000,
            ["primary a served"],
        ),
        (
            {"a": [failing(500)], "b": [text()]},
            BODY,
            (),
            [*TEXT, "[DONE]"],
            ("complete", 200, "b", "stop", 24, 5, False, None, None),
            88_000,
            ["primary a upstream_error upstream_http_error", "primary b served"],
        ),
        (
            {"a": [ScriptedResponse([ROLE])], "b": [text()]},
            BODY,
            (),
            [*TEXT, "[DONE]"],
            ("complete", 200, "b", "stop", 24, 5, False, None, None),
            88_000,
            ["primary a upstream_error stream_incomplete", "primary b served"],
        ),
        (
            {"a": [ScriptedResponse(split(fixture("error_midstream")))]},
            WITH_USAGE,
            (),
            ["role", "content:Partial", "error:upstream_stream_error"],
            ("error", 200, "a", None, 9, 2, True, "upstream_stream_error", None),
            34_000,
            ["primary a served"],
        ),
        (
            {"a": [ScriptedResponse(split(fixture("cut")))]},
            WITH_USAGE,
            (),
            ["role", "content:This answer is", "content: cut", "error:stream_incomplete"],
            ("incomplete", 200, "a", None, 9, 5, True, "stream_incomplete", None),
            58_000,
            ["primary a served"],
        ),
        (
            {"a": [text()]},
            BODY,
            (BLOCK_SIMPLE,),
            # the text before the match goes out, the match never: the upstream's finish
            # (read, so its reason is logged) ends the window; 30 chars read, 8 tokens
            [
                "role",
                "content:Server-sen",
                "content:t events are",
                "content: ",
                "error:guardrail_blocked",
            ],
            ("blocked", 200, "a", "stop", 9, 8, True, "guardrail_blocked", None),
            82_000,
            ["primary a served"],
        ),
    ],
    ids=[
        "usage",
        "no-usage",
        "failover-500",
        "failover-role-then-end",
        "error-midstream",
        "cut",
        "blocked",
    ],
)
async def test_a_stream_ends(
    tmp_path: Path,
    answers: dict[str, list[Answer]],
    body: dict[str, Any],
    rules: tuple[GuardrailConfig, ...],
    sent: list[str],
    expected: Row,
    charged: int,
    attempts: list[str],
) -> None:
    async with harness(tmp_path, answers, [A, B], guardrails=rules) as h:
        client = RecordingClient()
        exchange, status = await h.run(body, client)
    assert (status, exchange.status, client.status) == (200, 200, 200)
    assert events(client.body) == sent
    failed = sent[-1].startswith("error:")
    assert (client.finished, client.closed) == (True, failed)
    assert row(h.record) == expected
    assert tried(h.record) == attempts
    assert h.charged == [charged]
    blocked = [{"name": "no-simple", "stage": "output", "action": "block", "outcome": "blocked"}]
    assert h.record.guardrails == (blocked if rules else [])
    sending = 250.0 * len(attempts)  # each fake send takes 0.25 s
    assert (h.record.ttft_ms, h.record.duration_ms) == (sending, sending)
    assert (h.record.credits_held, h.record.credits_charged) == (HELD / 1e9, charged / 1e9)
    served = h.transport.responses[-1]
    assert (served.closed, served.released) == (failed, not failed)
    first = docs(client.body)[0]
    assert (first["id"], first["model"], first["connection"]) == ("req_1", "test/m", expected[2])


@pytest.mark.parametrize(
    ("steps", "kind", "expected"),
    [
        (split(fixture("text")), "usage", (24, 5, 88_000 / 1e9, "list")),
        (split(fixture("error_midstream")), "error", (9, 2, 34_000 / 1e9, "list")),
    ],
    ids=["usage-event-provider-counts", "error-event-priced-estimate"],
)
async def test_the_last_event_carries_the_usage_and_its_cost(
    tmp_path: Path, steps: list[bytes], kind: str, expected: tuple[int, int, float, str]
) -> None:
    async with harness(tmp_path, {"a": [ScriptedResponse(steps)]}, [A]) as h:
        client = RecordingClient()
        await h.run(WITH_USAGE, client)
    last = docs(client.body)[-1]
    usage = last["usage"]
    got = (usage["prompt_tokens"], usage["completion_tokens"], usage["cost"], usage["price_source"])
    assert got == expected
    assert ("error" in last, last.get("credits_used")) == (
        (False, 88_000 / 1e9) if kind == "usage" else (True, None)
    )


async def test_a_rate_limited_request_is_refused_before_anything_is_held(tmp_path: Path) -> None:
    async with harness(tmp_path, {}, [A], limits=LimitsConfig(key=LimitSpec(requests=1))) as h:
        subject = h.services.limit_subject(PRINCIPAL)
        assert subject == Subject("key_1", "acct_1", key=LimitSpec(requests=1))
        await h.services.limiter.admit(subject, 0)  # the key's one request this minute
        client = RecordingClient()
        exchange, status = await h.run(BODY, client)
    assert (status, exchange.status, client.status) == (429, 429, 429)
    assert client.headers == [
        ("x-request-id", "req_1"),
        ("x-ratelimit-limit-requests", "1"),
        ("x-ratelimit-remaining-requests", "0"),
        ("x-ratelimit-reset-requests", "1m0s"),
        ("content-type", "application/json"),
        ("retry-after", "60"),
    ]
    assert json.loads(client.body)["error"] == {
        "message": "Rate limit reached for key:requests: this API key's limit of 1 request "
        "a minute; retry in 60.0 s.",
        "type": "rate_limit_error",
        "param": None,
        "code": "rate_limit_exceeded",
    }
    assert (h.transport.sent, h.log.settlements) == ([], [])
    assert row(h.record) == ("error", 429, None, None, 0, 0, False, "rate_limit_exceeded", None)
    assert (h.record.credits_held, h.record.attempts) == (None, [])


@pytest.mark.parametrize(
    ("on_disconnect", "expected", "charged", "upstream"),
    [
        (
            "cancel",
            ("cancelled", 499, "a", None, 9, 5, True, None, "cancel"),
            58_000,
            (True, False, 4),
        ),
        (
            "drain",
            ("cancelled", 499, "a", "stop", 24, 5, False, None, "drain"),
            88_000,
            (False, True, 0),
        ),
    ],
)
async def test_a_client_that_leaves_mid_stream(
    tmp_path: Path,
    on_disconnect: str,
    expected: Row,
    charged: int,
    upstream: tuple[bool, bool, int],
) -> None:
    conn = connection("a", on_disconnect=on_disconnect)
    async with harness(tmp_path, {"a": [text()]}, [conn]) as h:
        client = RecordingClient(gone_at=2)  # the first write after the first event
        with pytest.raises(ClientGoneError):
            await h.run(WITH_USAGE, client)
        assert h.exchange is not None and h.exchange.status == 499
        await asyncio.wait_for(h.log.logged.wait(), 5)  # a drain settles when it ends
    assert events(client.body) == ["role", "content:Server"]
    assert row(h.record) == expected  # cancelled: 18 chars read, 5 tokens estimated
    assert h.charged == [charged]
    served = h.transport.responses[0]
    assert (served.closed, served.released, served.left) == upstream


def hanging(prefix: int) -> ScriptedResponse:
    """The text stream that goes silent after its first ``prefix`` events."""
    steps = split(fixture("text"))
    return ScriptedResponse([*steps[:prefix], asyncio.Event(), *steps[prefix:]])


@pytest.mark.parametrize(
    ("answer", "sent", "expected", "charged"),
    [
        (
            hanging(3),
            ["role", "content:Server", "content:-sent events", "error:server_shutting_down"],
            ("shutdown", 200, "a", None, 9, 5, True, "server_shutting_down", None),
            58_000,
        ),
        (
            asyncio.Event(),  # the upstream has not answered yet
            [],
            ("shutdown", 503, None, None, 0, 0, False, "server_shutting_down", None),
            0,
        ),
    ],
    ids=["mid-stream", "before-the-response"],
)
async def test_a_shutdown_interrupts_the_stream(
    tmp_path: Path, answer: Answer, sent: list[str], expected: Row, charged: int
) -> None:
    async with harness(tmp_path, {"a": [answer]}, [A]) as h:
        client = RecordingClient()
        task = asyncio.create_task(h.run(WITH_USAGE, client))
        while not h.transport.sent or (sent and client.writes < 2):
            await asyncio.sleep(0)
        await asyncio.sleep(0)  # the exchange is waiting on the upstream
        client.interrupt()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert row(h.record) == expected
    assert h.charged == [charged]
    assert client.keep_alive is False
    if sent:
        assert events(client.body) == sent
        assert client.ended_now
        assert docs(client.body)[-1]["usage"]["completion_tokens"] == 5
        assert h.transport.responses[0].closed
    else:
        assert client.status == 503
        assert json.loads(client.body)["error"]["code"] == "server_shutting_down"


BLOCK_THERE = GuardrailConfig(name="no-there", stage="output", kind="keywords", words=["there"])
COMPLETE = ("complete", 200, "a", "stop", 10, 5, False, None, None)


@pytest.mark.parametrize(
    ("on_disconnect", "rules", "status", "expected"),
    [
        ("cancel", (), 200, COMPLETE),
        ("drain", (), 200, COMPLETE),
        (
            "cancel",
            (BLOCK_THERE,),
            400,
            ("blocked", 400, "a", "stop", 10, 5, False, "guardrail_blocked", None),
        ),
    ],
    ids=["whole", "whole-drainable", "blocked"],
)
async def test_a_whole_answer(
    tmp_path: Path,
    on_disconnect: str,
    rules: tuple[GuardrailConfig, ...],
    status: int,
    expected: Row,
) -> None:
    answer = ScriptedResponse.json(completion("Hello there"))
    conn = connection("a", on_disconnect=on_disconnect)
    async with harness(tmp_path, {"a": [answer]}, [conn], guardrails=rules) as h:
        client = RecordingClient()
        _, got = await h.run({**BODY, "stream": False}, client)
    assert (got, client.status) == (status, status)
    assert row(h.record) == expected
    assert h.charged == [60_000]  # charged even when blocked: the tokens were produced
    assert (h.record.stream, h.record.ttft_ms, answer.released) == (False, 250.0, True)
    doc = json.loads(client.body)
    if status == 200:
        assert doc["choices"][0]["message"]["content"] == "Hello there"
        usage = doc["usage"]
        assert (usage["prompt_tokens"], usage["completion_tokens"], usage["cost"]) == (10, 5, 6e-05)
        assert (doc["id"], doc["connection"], doc["credits_used"]) == ("req_1", "a", 6e-05)
    else:
        assert doc["error"]["code"] == "guardrail_blocked"


async def test_a_failure_inside_the_gateway_is_logged_as_an_error_not_complete(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by an adversarial pass: a bug's 500 was logged as status complete with no
    error, and counted in spend reports as a served request."""

    async def broken(*_: object) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr("sluice.exchange.work.complete", broken)
    conn = connection("a")
    async with harness(tmp_path, {"a": []}, [conn]) as h:
        client = RecordingClient()
        _, got = await h.run({**BODY, "stream": False}, client)
    assert (got, client.status) == (500, 500)
    assert (h.record.status, h.record.http_status, h.record.error_type) == (
        "error",
        500,
        "server_error",
    )
    assert h.charged in ([], [0])  # nothing served, nothing charged
