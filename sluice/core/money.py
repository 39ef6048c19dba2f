"""Amounts of money: integer nano-USD in the ledger, USD as people type and read it."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

NANO_PER_USD = 10**9


def usd_from_nano(nano: int) -> float:
    return nano / NANO_PER_USD


MAX_AMOUNT_USD = 10**9
"""The largest amount one credit or debit may move (a balance stays far inside int64)."""


def nano_from_usd_text(text: str) -> int:
    """An amount typed by an operator (``"25"``, ``"0.000000001"``), exactly; ``ValueError``
    when it is not a number, is finer than a nano-dollar or is larger than
    ``MAX_AMOUNT_USD`` either way."""
    try:
        amount = Decimal(text) * NANO_PER_USD
    except InvalidOperation:
        amount = Decimal("NaN")
    if not amount.is_finite():
        raise ValueError(f"'{text}' is not an amount in USD")
    if abs(amount) > MAX_AMOUNT_USD * NANO_PER_USD:
        raise ValueError(f"amounts are at most ${MAX_AMOUNT_USD:,} either way")
    if amount != amount.to_integral_value():
        raise ValueError("amounts have at most 9 decimals (nano-dollars)")
    return int(amount)
