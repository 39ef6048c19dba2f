"""When a failure opens a circuit, the log says which connection and model, why, and
for how long (issue 24: an operator saw failover and no reason)."""

from __future__ import annotations

import logging

import pytest

from sluice.errors import ApiError
from sluice.routing.attempts import AttemptRecord
from tests.support.fake_transport import connection
from tests.support.routing import MODEL, failing, ok, plan, request, setup

A, B = connection("a"), connection("b")


async def test_the_circuit_that_opens_is_logged_with_its_reason_and_duration(
    caplog: pytest.LogCaptureFixture,
) -> None:
    _, _, router = setup(
        {"a": [failing(503, "overloaded", "server_busy"), ok()], "b": [ok()]},
        threshold=1,
        cooldown=42.0,
    )
    records: list[AttemptRecord] = []
    with caplog.at_level(logging.WARNING, logger="sluice.routing"):
        stream = await router.open_stream(request(), plan(A, B), records)
        stream.close()
    [opened] = [r for r in caplog.records if "circuit open" in r.getMessage()]
    text = opened.getMessage()
    assert text.startswith("circuit open for 42 s: connection a, model " + MODEL.id), text
    assert "(upstream_overloaded: The provider is overloaded: overloaded)" in text, text


async def test_a_refusal_that_is_the_requests_fault_opens_nothing_and_logs_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    _, _, router = setup({"a": [failing(400, "bad request")]}, threshold=1)
    with caplog.at_level(logging.WARNING, logger="sluice.routing"), pytest.raises(ApiError):
        await router.open_stream(request(), plan(A), [])
    assert not [r for r in caplog.records if "circuit open" in r.getMessage()]
