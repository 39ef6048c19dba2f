"""What ``sluice ledger reconcile`` checks, the same SQL on both backends: every balance
is the sum of its ledger, every ``held`` the sum of its open holds, no charge credits an
account and none is outside its hold."""

from __future__ import annotations

import msgspec


class Mismatch(msgspec.Struct, frozen=True):
    account: str
    what: str
    """``balance`` or ``held`` (stored vs. summed), ``negative_charges`` (what charges
    credited) or ``charges_beyond_holds`` (what holds were charged past their amount or
    below zero); for the last two ``expected`` is 0."""
    stored: int
    expected: int


RECONCILE_SUMS = (
    "(SELECT COALESCE(SUM(amount), 0) FROM ledger l WHERE l.account_id = a.id), "
    "a.held, (SELECT COALESCE(SUM(amount), 0) FROM holds h "
    "         WHERE h.account_id = a.id AND h.released_at IS NULL), "
    "(SELECT COALESCE(SUM(amount), 0) FROM ledger l "
    "         WHERE l.account_id = a.id AND l.kind = 'charge' AND l.amount > 0), "
    "(SELECT COALESCE(SUM(CASE WHEN h.charged > h.amount THEN h.charged - h.amount "
    "         ELSE -h.charged END), 0) FROM holds h "
    "         WHERE h.account_id = a.id AND (h.charged > h.amount OR h.charged < 0))"
)
"""The sums :func:`mismatches` reads, per account row ``a`` (same SQL on both backends)."""


def mismatches(rows: list[tuple[str, int, int, int, int, int, int]]) -> list[Mismatch]:
    """From ``(name, balance, Σ ledger, held, Σ open holds, Σ credited by charges,
    Σ charged outside holds)`` rows: what does not add up."""
    out = []
    for name, balance, ledger_sum, held, open_sum, credited, outside in rows:
        if balance != ledger_sum:
            out.append(Mismatch(name, "balance", balance, ledger_sum))
        if held != open_sum:
            out.append(Mismatch(name, "held", held, open_sum))
        if credited:
            out.append(Mismatch(name, "negative_charges", int(credited), 0))
        if outside:
            out.append(Mismatch(name, "charges_beyond_holds", int(outside), 0))
    return out
