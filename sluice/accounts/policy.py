"""What an API key or an account carries, as the admin API and the CLI set it
(docs/admin.md).

One body shape for creating and for patching a key: a field left out keeps its value,
``null`` clears it. The policy itself (:class:`~sluice.core.principal.KeyPolicy`) is
stored with the key and enforced on the request path.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Final

import msgspec
from msgspec import UNSET, UnsetType

from sluice.core.money import nano_from_usd_text, usd_from_nano
from sluice.core.principal import AccountPolicy, Allowance, BudgetPeriod, KeyPolicy, period_start
from sluice.errors import InvalidRequestError
from sluice.storage.base import Account, KeyInfo, Store
from sluice.storage.spend import SpendFilters
from sluice.wire.chat import ModelName

Text = Annotated[str, msgspec.Meta(max_length=128, pattern=r"^[^\x00-\x1f\x7f]*$")]
"""Free text a person reads (a label, a metadata value): no control characters."""
ACCOUNT_NAME: Final = r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}$"
"""1-64 letters, digits, ``.``, ``_`` and ``-``, a letter or digit first: a name that
goes into a URL path (``/admin/accounts/{name}``) as it is."""
AccountName = Annotated[str, msgspec.Meta(pattern=ACCOUNT_NAME)]
ModelGlob = Annotated[
    str, msgspec.Meta(min_length=1, max_length=512, pattern=r"^[^\x00-\x1f\x7f]+$")
]
PerMinute = Annotated[int, msgspec.Meta(ge=1, le=1_000_000_000)]


class AllowanceChanges(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """What a key and an account both carry (:class:`~sluice.core.principal.Allowance`)."""

    rpm: PerMinute | UnsetType | None = UNSET
    tpm: PerMinute | UnsetType | None = UNSET
    metadata: dict[Text, Text] | UnsetType | None = UNSET
    budget: str | int | float | UnsetType | None = UNSET
    """USD per ``budget_period``."""
    budget_period: BudgetPeriod | UnsetType = UNSET


class KeyChanges(AllowanceChanges, forbid_unknown_fields=True, kw_only=True):
    """``name`` is the older spelling of ``label``; ``expires_at`` is ISO 8601 with a
    time zone (``2027-01-31T00:00:00Z``)."""

    label: Text | UnsetType | None = UNSET
    name: Text | UnsetType | None = UNSET
    models: list[ModelName] | UnsetType | None = UNSET
    expires_at: str | UnsetType | None = UNSET
    resumable: bool | UnsetType | None = UNSET
    cache_read: bool | UnsetType | None = UNSET
    cache_fill: bool | UnsetType | None = UNSET


_LAST_SECOND: Final = 253_402_300_799
"""9999-12-31T23:59:59Z: the last second an expiry can be written back in ISO 8601."""


def parse_expiry(text: str) -> int:
    """Unix seconds of an ISO 8601 time that names its time zone."""
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidRequestError(
            f"'{text}' is not an ISO 8601 time.", param="expires_at"
        ) from None
    if when.tzinfo is None:
        raise InvalidRequestError(
            "Give the time zone of expires_at (for example 2027-01-31T00:00:00Z).",
            param="expires_at",
        )
    seconds = int(when.timestamp())
    if not 0 <= seconds <= _LAST_SECOND:
        raise InvalidRequestError(
            "expires_at must be between 1970 and 9999 (UTC).", param="expires_at"
        )
    return seconds


def apply_changes(
    changes: KeyChanges, label: str | None, policy: KeyPolicy
) -> tuple[str | None, KeyPolicy]:
    """The label and policy after ``changes``."""
    if not isinstance(changes.label, UnsetType):
        label = changes.label
    elif not isinstance(changes.name, UnsetType):
        label = changes.name
    updates = _allowance_updates(changes)
    if not isinstance(changes.models, UnsetType):
        updates["models"] = None if changes.models is None else tuple(changes.models)
    if not isinstance(changes.resumable, UnsetType):
        updates["resumable"] = changes.resumable is True
    for name in ("cache_read", "cache_fill"):  # null: back to the default, allowed
        value = getattr(changes, name)
        if not isinstance(value, UnsetType):
            updates[name] = value is not False
    if not isinstance(changes.expires_at, UnsetType):
        updates["expires_at"] = (
            None if changes.expires_at is None else parse_expiry(changes.expires_at)
        )
    return label, msgspec.structs.replace(policy, **updates)


def apply_account_changes(changes: AllowanceChanges, policy: AccountPolicy) -> AccountPolicy:
    """An account's policy after ``changes``."""
    return msgspec.structs.replace(policy, **_allowance_updates(changes))


def _allowance_updates(changes: AllowanceChanges) -> dict[str, object]:
    updates: dict[str, object] = {}
    for name in ("rpm", "tpm", "budget_period"):
        value = getattr(changes, name)
        if not isinstance(value, UnsetType):
            updates[name] = value
    if not isinstance(changes.metadata, UnsetType):
        updates["metadata"] = changes.metadata or {}
    if not isinstance(changes.budget, UnsetType):
        updates["budget"] = None if changes.budget is None else _budget(changes.budget)
    return updates


def _budget(amount: str | int | float) -> int:
    try:
        nano = nano_from_usd_text(str(amount))
    except ValueError as exc:
        raise InvalidRequestError(f"budget: {exc}.", param="budget") from None
    if nano < 0:
        raise InvalidRequestError("A budget cannot be negative.", param="budget")
    return nano


def iso_time(seconds: int | None) -> str | None:
    if seconds is None:
        return None
    return datetime.fromtimestamp(seconds, UTC).isoformat().replace("+00:00", "Z")


async def key_doc(store: Store, key: KeyInfo, now: int) -> dict[str, object]:
    """A key as the admin API and ``--json`` show it (never its secret), with what it
    spent in its budget's current period."""
    policy = key.policy
    spent = await store.key_spent(key.id, period_start(now, policy.budget_period))
    return {
        "id": key.id,
        "prefix": key.prefix,
        "name": key.name,
        "created_at": key.created_at,
        "revoked": key.revoked_at is not None,
        "models": None if policy.models is None else list(policy.models),
        "expires_at": iso_time(policy.expires_at),
        "resumable": policy.resumable,
        "cache_read": policy.cache_read,
        "cache_fill": policy.cache_fill,
        **allowance_doc(policy, spent),
    }


async def account_spent(store: Store, account: Account, now: int) -> int:
    """What the account was charged in its budget's current period."""
    since = period_start(now, account.policy.budget_period)
    _, total = await store.spend(SpendFilters(account_id=account.id, since=since), "day", 0, None)
    return total.spend


def allowance_doc(allowance: Allowance, spent: int | None) -> dict[str, object]:
    """The limits and budget of a key or account; ``spent`` this period, if known."""
    budget = allowance.budget
    doc: dict[str, object] = {
        "rpm": allowance.rpm,
        "tpm": allowance.tpm,
        "budget": None if budget is None else usd_from_nano(budget),
        "budget_period": allowance.budget_period,
    }
    if spent is not None:
        doc["spent"] = usd_from_nano(spent)
    return doc | {"metadata": dict(allowance.metadata)}
