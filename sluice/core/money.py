"""Amounts of money: integer nano-USD in the ledger, USD as people type and read it."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

NANO_PER_USD = 10**9


def usd_from_nano(nano: int) -> float:
    return nano / NANO_PER_USD


def usd_text(nano: int) -> str:
    """Money as people read it: ``$15.00``, ``-$15.00``, ``$0.005``, ``$0.000000001``: at
    least 2 decimals and as many more (up to 9) as the amount has, exactly."""
    whole, _, cents = f"{Decimal(abs(nano)) / NANO_PER_USD:.9f}".partition(".")
    return f"{'-' if nano < 0 else ''}${whole}.{cents.rstrip('0').ljust(2, '0')}"


MAX_AMOUNT_USD = 10**9
"""The largest amount one credit or debit may move, and the largest balance either way
(in nano-USD, :data:`MAX_BALANCE_NANO`, far inside int64 with every hold beside it)."""
MAX_BALANCE_NANO = MAX_AMOUNT_USD * NANO_PER_USD


def balance_out_of_range(balance: int, amount: int) -> bool:
    """``amount`` added to ``balance`` would leave it past :data:`MAX_BALANCE_NANO`."""
    return abs(balance + amount) > MAX_BALANCE_NANO


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
