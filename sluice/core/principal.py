"""The caller of a request, as authentication found it, and what its key may do."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from fnmatch import fnmatchcase
from typing import Literal

import msgspec

BudgetPeriod = Literal["daily", "weekly", "monthly", "never"]


class Allowance(msgspec.Struct, frozen=True, omit_defaults=True, forbid_unknown_fields=True):
    """What a key or an account carries (docs/admin.md), stored with it: ``rpm`` /
    ``tpm``, its own requests and tokens per minute (over the config's limits);
    ``budget``, nano-USD it may spend per ``budget_period`` (UTC days, weeks from
    Monday, calendar months; ``never`` resets), enforced by credit holds;
    ``metadata``, free fields (team, user) for the operator."""

    rpm: int | None = None
    tpm: int | None = None
    budget: int | None = None
    budget_period: BudgetPeriod = "never"
    metadata: dict[str, str] = msgspec.field(default_factory=dict)


class AccountPolicy(Allowance, frozen=True):
    """An account's own limits and budget, over every one of its keys."""


class KeyPolicy(Allowance, frozen=True):
    """What one API key carries besides :class:`Allowance`: ``models``, globs
    (``openai/*``) over the model and route names the key may ask for, None for any;
    ``expires_at``, Unix seconds after which the key is refused."""

    models: tuple[str, ...] | None = None
    expires_at: int | None = None
    resumable: bool = False
    """Every stream of the key is resumable (docs/api.md#resumable-streams), for
    clients that cannot ask for it."""
    cache_read: bool = True
    """The key's requests may be answered from the response cache (docs/cache.md)."""
    cache_fill: bool = True
    """The key's answers may be kept by the response cache, and joined in flight."""

    def allows(self, name: str) -> bool:
        return self.models is None or any(fnmatchcase(name, glob) for glob in self.models)

    def expired(self, now: float) -> bool:
        return self.expires_at is not None and now >= self.expires_at


def period_start(now: int, period: BudgetPeriod) -> int:
    """Unix seconds at which the budget period holding ``now`` began (UTC)."""
    if period == "never":
        return 0
    day = datetime.fromtimestamp(now, UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    if period == "weekly":
        day -= timedelta(days=day.weekday())
    elif period == "monthly":
        day = day.replace(day=1)
    return int(day.timestamp())


NO_POLICY = KeyPolicy()
NO_ACCOUNT_POLICY = AccountPolicy()
_POLICY = msgspec.json.Decoder(KeyPolicy)
_ACCOUNT_POLICY = msgspec.json.Decoder(AccountPolicy)
_ENCODER = msgspec.json.Encoder()


def policy_from_json(text: str | bytes | None) -> KeyPolicy:
    return NO_POLICY if not text else _POLICY.decode(text)


def account_policy_from_json(text: str | bytes | None) -> AccountPolicy:
    return NO_ACCOUNT_POLICY if not text else _ACCOUNT_POLICY.decode(text)


def policy_json(policy: Allowance) -> str:
    return _ENCODER.encode(policy).decode()


class Principal(msgspec.Struct, frozen=True):
    """Who is calling: the account and the key it used, with the key's and the
    account's policies."""

    account_id: str
    account_name: str
    key_id: str
    key_prefix: str
    metered: bool
    is_dev: bool
    policy: KeyPolicy = NO_POLICY
    account_policy: AccountPolicy = NO_ACCOUNT_POLICY
