"""What :class:`Metrics` counts from a request-log row, and what it reads when scraped,
without a gateway: failovers, a client leaving, guardrail blocks, breaker states (the
accounts' own folded into one series) and a ledger that does not answer."""

from __future__ import annotations

from typing import Any

import pytest

from sluice.exchange.metrics import ACCOUNT_OWNED, Metrics, breaker_states
from sluice.exchange.tasks import Tasks
from sluice.routing.breaker import Breaker
from sluice.storage.base import RequestRecord
from tests.server.test_metrics_mix import samples

OPERATORS = frozenset({"conn_a", "conn_b"})


def attempt(connection: str, outcome: str) -> dict[str, Any]:
    return {"position": "primary", "model": "m", "connection": connection, "outcome": outcome}


def record(**fields: Any) -> RequestRecord:
    return RequestRecord(id="req_1", account_id="acct", key_id="key", created_at=1, **fields)


class Ledger:
    def __init__(self, holds: tuple[int, int] | None) -> None:
        self.holds = holds

    async def open_holds(self) -> tuple[int, int]:
        if self.holds is None:
            raise OSError("connection refused")
        return self.holds


def metrics(breaker: Breaker | None = None) -> Metrics:
    return Metrics(breaker or Breaker(2, 30.0, 60.0), lambda: 100.0, OPERATORS)


def counted(m: Metrics, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {labels: v for (n, labels), v in samples(m.render().decode()).items() if n == name}


def test_every_attempt_but_the_last_is_a_failover_by_its_connection() -> None:
    m = metrics()
    tried = [attempt("conn_a", "upstream_error"), attempt("conn_x", "skipped")]
    m.ran(record(attempts=[*tried, attempt("conn_b", "served")], status="complete"))
    m.ran(record(attempts=[attempt("conn_a", "invalid_request_error")]))  # not failed over
    assert counted(m, "sluice_failovers_total") == {
        (("connection", "conn_a"),): 1,
        (("connection", ACCOUNT_OWNED),): 1,
    }


@pytest.mark.parametrize(
    ("disconnect", "cancellations", "drains"),
    [(None, 0, 0), ("cancel", 1, 0), ("drain", 0, 1)],
    ids=["stayed", "cancelled", "drained"],
)
def test_a_client_leaving_is_a_cancellation_or_a_drain(
    disconnect: str | None, cancellations: int, drains: int
) -> None:
    m = metrics()
    m.ran(record(attempts=[attempt("conn_a", "served")], disconnect=disconnect))
    assert counted(m, "sluice_cancellations_total") == {(): cancellations}
    assert counted(m, "sluice_drains_total") == {(): drains}


def test_blocks_are_counted_by_guardrail_and_stage_other_outcomes_are_not() -> None:
    m = metrics()
    note = {"name": "no-keys", "stage": "output", "action": "block", "outcome": "blocked"}
    logged = {"name": "pii", "stage": "input", "action": "log", "outcome": "matched"}
    m.ran(record(attempts=[attempt("conn_a", "served")], guardrails=[logged, note]))
    m.ran(record(guardrails=[{**note, "stage": "input"}], error_type="guardrail_error"))
    assert counted(m, "sluice_guardrail_blocks_total") == {
        (("guardrail", "no-keys"), ("stage", "input")): 1,
        (("guardrail", "no-keys"), ("stage", "output")): 1,
    }
    # only the input block was refused before any upstream call
    assert counted(m, "sluice_refusals_total") == {(("reason", "guardrail"),): 1}


def test_breaker_states_fold_the_accounts_own_connections_into_their_worst() -> None:
    breaker = Breaker(1, 30.0, 60.0)
    for key in ("conn_a", "conn_mine_1"):
        breaker.failure((key, "m"), 100.0)
    breaker.failure(("conn_mine_2", "m"), 50.0)  # cooled down by 100: half-open
    breaker.failure(("conn_b", "m"), 50.0)
    breaker.failure(("conn_b", "other"), 100.0)  # a connection shows its worst model
    assert breaker_states(breaker, 100.0, OPERATORS) == {
        "conn_a": 2.0,
        "conn_b": 2.0,
        ACCOUNT_OWNED: 2.0,
    }


async def test_a_scrape_reads_the_open_holds_and_the_requests_running() -> None:
    m = metrics()
    found = samples((await m.scrape(Ledger((3, 1_500_000_000)), Tasks(lambda: 0.0, 60))).decode())
    assert found["sluice_holds_open", ()] == 3
    assert found["sluice_credits_held_usd", ()] == 1.5
    assert found["sluice_requests_in_flight", ()] == found["sluice_drains_in_flight", ()] == 0


async def test_a_scrape_answers_without_the_holds_when_the_ledger_fails(
    caplog: pytest.LogCaptureFixture,
) -> None:
    m = metrics()
    text = (await m.scrape(Ledger(None), Tasks(lambda: 0.0, 60))).decode()
    assert "sluice_holds_open" not in text and "sluice_credits_held_usd" not in text
    assert "sluice_requests_in_flight 0.0" in text and "sluice_requests_total" in text
    assert "open holds not read (OSError)" in caplog.text
    assert "connection refused" not in caplog.text  # a store's message may name its host


def test_render_reads_nothing_it_would_need_io_or_the_tasks_for() -> None:
    text = metrics().render().decode()
    assert "sluice_connection_breaker_state" in text
    assert "sluice_holds_open" not in text and "sluice_requests_in_flight" not in text
