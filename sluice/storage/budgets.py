"""Budgets of keys and accounts, checked by the holds (docs/admin.md): what a budget
has used is its open holds plus its charges since the period began, in SQL both
backends share (``{0}``/``{1}``: the backend's placeholders)."""

from __future__ import annotations

import msgspec

from sluice.core.money import usd_text
from sluice.errors import BudgetExceededError

KEY_SPENT_SQL = (
    "SELECT COALESCE(-SUM(amount), 0) FROM ledger "
    "WHERE key_id = {0} AND kind = 'charge' AND created_at >= {1}"
)
KEY_USED_SQL = (
    "SELECT COALESCE((SELECT SUM(amount) FROM holds "
    "WHERE key_id = {0} AND released_at IS NULL), 0) "
    "- COALESCE((SELECT SUM(amount) FROM ledger "
    "WHERE key_id = {0} AND kind = 'charge' AND created_at >= {1}), 0)"
)
"""What a key has used of its budget: open holds plus charges (negative ledger amounts)
since its period began; ``{0}``/``{1}``: the backend's placeholders for key and since."""


ACCOUNT_USED_SQL = (
    "SELECT held - COALESCE((SELECT SUM(amount) FROM ledger "
    "WHERE account_id = {0} AND kind = 'charge' AND created_at >= {1}), 0) "
    "FROM accounts WHERE id = {0}"
)
"""What an account has used of its budget: its held amount plus its charges since its
period began."""


class KeyBudgetExceededError(BudgetExceededError):
    default_code = "key_budget_exceeded"


class AccountBudgetExceededError(BudgetExceededError):
    default_code = "account_budget_exceeded"


def _short_of(whose: str, limit: int, used: int, amount: int) -> str:
    return (
        f"{whose} budget ({usd_text(limit)} this period) does not cover this request: "
        f"{usd_text(max(used, 0))} is already charged or held, and this request holds up "
        f"to {usd_text(amount)} until it is settled at its actual cost (a lower max_tokens "
        "holds less)."
    )


def key_budget_error(limit: int, used: int, amount: int) -> KeyBudgetExceededError:
    """``used``: charged and held this period; ``amount``: the refused hold."""
    return KeyBudgetExceededError(_short_of("This API key's", limit, used, amount))


def account_budget_error(limit: int, used: int, amount: int) -> AccountBudgetExceededError:
    """As :func:`key_budget_error`, for the account's budget."""
    return AccountBudgetExceededError(_short_of("This account's", limit, used, amount))


class Budget(msgspec.Struct, frozen=True):
    """A key's or an account's budget for one hold: at most ``limit`` nano-USD of
    charges since ``since`` plus open holds."""

    limit: int
    since: int
