"""Which buckets a request touches, and the decision built from their debts."""

from __future__ import annotations

import pytest

from sluice.config import LimitSpec
from sluice.limits.bucket import Bucket
from sluice.limits.decision import (
    Decision,
    Quota,
    Subject,
    Ticket,
    admission_lines,
    decide,
    fits,
    settlement_lines,
)

BOTH = Subject(
    key_id="key_1",
    account_id="acct_1",
    key=LimitSpec(requests=10, tokens=1000, window=60),
    account=LimitSpec(requests=100, tokens=5000, window=1),
)


def test_admission_charges_one_request_and_the_estimate_on_every_limit() -> None:
    lines = admission_lines(BOTH, 300)
    assert [(line.name, line.bucket, line.amount) for line in lines] == [
        ("key:requests", Bucket(10, 60_000), 1),
        ("account:requests", Bucket(100, 1000), 1),
        ("key:tokens", Bucket(1000, 60_000), 300),
        ("account:tokens", Bucket(5000, 1000), 300),
    ]
    assert lines[0].ident == "{acct_1}:key:key_1:requests:10/60000"
    assert lines[3].ident == "{acct_1}:account:acct_1:tokens:5000/1000"


@pytest.mark.parametrize(
    ("subject", "names"),
    [
        (Subject("k", "a"), []),
        (Subject("k", "a", key=LimitSpec()), []),
        (Subject("k", "a", key=LimitSpec(requests=5)), ["key:requests"]),
        (Subject("k", "a", account=LimitSpec(tokens=5)), ["account:tokens"]),
    ],
    ids=["none", "empty-spec", "key-requests", "account-tokens"],
)
def test_only_configured_limits_apply(subject: Subject, names: list[str]) -> None:
    assert [line.name for line in admission_lines(subject, 10)] == names


def test_a_changed_limit_is_a_fresh_bucket() -> None:
    before = admission_lines(Subject("k", "a", key=LimitSpec(requests=5)), 0)[0].ident
    after = admission_lines(Subject("k", "a", key=LimitSpec(requests=6)), 0)[0].ident
    assert before != after


@pytest.mark.parametrize(
    ("estimated", "total", "amounts"),
    [(300, 450, [150, 150]), (300, 100, [-200, -200]), (300, 300, []), (300, 0, [-300, -300])],
    ids=["more", "less", "exact", "cancelled-before-any-token"],
)
def test_settlement_adjusts_tokens_by_the_difference(
    estimated: int, total: int, amounts: list[int]
) -> None:
    lines = settlement_lines(Ticket(BOTH, estimated), total)
    assert [line.amount for line in lines] == amounts
    assert {line.dimension for line in lines} <= {"tokens"}  # the request stays counted


def test_negative_token_counts_are_refused() -> None:
    with pytest.raises(ValueError, match="estimated_tokens"):
        admission_lines(BOTH, -1)
    with pytest.raises(ValueError, match="total_tokens"):
        settlement_lines(Ticket(BOTH, 0), -1)


def test_allowed_decision_reports_the_least_remaining_per_dimension() -> None:
    lines = admission_lines(BOTH, 300)
    debts = [3 * 60_000, 90 * 1000, 300 * 60_000, 4000 * 1000]  # after the charge
    assert fits(lines, [0, 0, 0, 0])
    decision = decide(Ticket(BOTH, 300), lines, debts, allowed=True)
    assert decision == Decision(
        allowed=True,
        requests=Quota(limit=10, remaining=7, reset_ms=18_000),  # key: 7 left, account: 10
        tokens=Quota(limit=1000, remaining=700, reset_ms=18_000),  # key: 700, account: 1000
        ticket=Ticket(BOTH, 300),
    )


def test_ties_report_the_later_reset() -> None:
    subject = Subject(
        "k", "a", key=LimitSpec(requests=10, window=10), account=LimitSpec(requests=10, window=60)
    )
    lines = admission_lines(subject, 0)
    decision = decide(Ticket(subject, 0), lines, [10_000, 60_000], allowed=True)
    assert decision.requests == Quota(limit=10, remaining=9, reset_ms=6000)


def test_denied_decision_waits_for_the_slowest_limit_and_names_every_exceeded_one() -> None:
    lines = admission_lines(BOTH, 300)
    debts = [10 * 60_000, 0, 900 * 60_000, 5000 * 1000]  # key requests and both tokens full-ish
    assert not fits(lines, debts)
    decision = decide(Ticket(BOTH, 300), lines, debts, allowed=False)
    assert decision.allowed is False and decision.ticket is None
    # key requests: 6 s for one request; key tokens: 200 over → 12 s; account tokens: 60 ms
    assert decision.retry_after == 12.0
    assert decision.exceeded == ("key:requests", "key:tokens", "account:tokens")
    assert decision.requests == Quota(limit=10, remaining=0, reset_ms=60_000)
    assert decision.tokens == Quota(limit=5000, remaining=0, reset_ms=1000)
