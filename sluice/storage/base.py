"""What the gateway needs from storage, whatever the backend (SQLite, PostgreSQL).

Money is integer nano-dollars (1e-9 USD) everywhere: balances, holds, charges, ledger
amounts. Every query is parameterized; no value from a request is ever formatted into
SQL. The invariants a backend keeps, under concurrency and across processes:

* ``account.held`` is the sum of the account's open holds, and a hold is only placed
  when ``balance - held`` covers it (the check and the update are one atomic step);
* ``account.balance`` is the sum of the account's ledger entries (credits positive,
  charges negative);
* a charge is never negative (its ledger amount is never positive) and never more
  than its hold; a database constraint refuses both, and ``sluice ledger reconcile``
  checks all four, including rows written before the constraint existed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, Protocol

import msgspec

from sluice.core.money import MAX_AMOUNT_USD
from sluice.core.principal import (
    NO_ACCOUNT_POLICY,
    NO_POLICY,
    AccountPolicy,
    KeyPolicy,
    Principal,
)
from sluice.errors import ConflictError, InvalidRequestError
from sluice.storage.budgets import Budget
from sluice.storage.reconcile import Mismatch
from sluice.storage.request_log import MAX_EXAMINED

# the request log's listing terms, still importable from here, where they used to live
from sluice.storage.request_log import REQUEST_STATUSES as REQUEST_STATUSES  # noqa: PLC0414
from sluice.storage.request_log import RequestFilters as RequestFilters  # noqa: PLC0414
from sluice.storage.request_log import RequestPosition as RequestPosition  # noqa: PLC0414
from sluice.storage.reserves import ReserveStore
from sluice.storage.responses import ResponseStore
from sluice.storage.spend import SpendAfter, SpendBy, SpendFilters, SpendGroup, SpendTotal
from sluice.storage.tenants import TenantStore


class ConstraintViolationError(Exception):
    """A write the database refused because it would break an invariant above (a
    negative charge, a charge beyond its hold); nothing of that write was kept."""


class Account(msgspec.Struct, frozen=True):
    id: str
    name: str
    metered: bool
    is_dev: bool
    balance: int
    held: int
    open_holds: int
    created_at: int
    policy: AccountPolicy = NO_ACCOUNT_POLICY

    @property
    def available(self) -> int:
        return self.balance - self.held


class KeyInfo(msgspec.Struct, frozen=True):
    """``name``: the key's label."""

    id: str
    account_id: str
    prefix: str
    name: str | None
    created_at: int
    revoked_at: int | None
    policy: KeyPolicy = NO_POLICY


class KeySelector(msgspec.Struct, frozen=True):
    """Which live keys a revocation names, by ``by``: ``prefix``, every key whose readable
    prefix starts with ``value``; ``digest``, the key whose secret has that SHA-256 digest;
    ``id``, the key with that id. A rotation gives a key a new prefix and digest, never a
    new id."""

    by: Literal["prefix", "digest", "id"]
    value: str


def one_key(prefix: str, found: list[KeyInfo]) -> KeyInfo | None:
    """:meth:`Store.find_key`'s answer from the (at most two) live keys that match."""
    if len(found) > 1:
        raise ConflictError(
            f"More than one live key starts with '{prefix}': give more of it.",
            code="ambiguous_key_prefix",
        )
    return found[0] if found else None


class HoldRequest(msgspec.Struct, frozen=True):
    hold_id: str
    account_id: str
    key_id: str
    request_id: str
    amount: int
    now: int
    expires_at: int
    key_budget: Budget | None = None
    account_budget: Budget | None = None


class Settlement(msgspec.Struct, frozen=True):
    """The end of a metered request: what it costs, and the hold to release."""

    hold_id: str
    account_id: str
    key_id: str
    request_id: str
    charge: int
    now: int
    model: str | None = None
    """The model that served the request and its provider, for spend reports."""
    provider: str | None = None
    reservation: str | None = None
    """The reservation the hold came from (:mod:`~.reserves`): the hold was never
    stored; it is written closed, ``held`` placed at ``held_at``, and the charge is
    drawn from the reservation."""
    held: int = 0
    held_at: int = 0


class RequestRecord(msgspec.Struct, kw_only=True):
    """One row of the request log (docs/api.md#the-request-log)."""

    id: str
    account_id: str
    key_id: str
    created_at: int
    front_door: str = "chat"
    """The wire the request came in on: ``chat`` (chat completions) or ``messages``."""
    requested_model: str | None = None
    served_model: str | None = None
    route: str | None = None
    route_name: str | None = None
    provider: str | None = None
    connection: str | None = None
    attempts: list[dict[str, Any]] = []
    status: str = "error"
    finish_reason: str | None = None
    stream: bool = False
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    usage_estimated: bool = False
    cost: float | None = None
    price_source: str | None = None
    credits_held: float | None = None
    credits_charged: float | None = None
    ttft_ms: float | None = None
    duration_ms: float = 0.0
    tokens_per_second: float | None = None
    http_status: int = 0
    error_type: str | None = None
    error_code: str | None = None
    error_message: str | None = None
    tool_calls: list[dict[str, Any]] = []
    disconnect: str | None = None
    guardrails: list[dict[str, str]] = []
    """What guardrails did: ``{name, stage, action, outcome}`` each, never matched text."""
    repairs: list[dict[str, Any]] = []
    """What the gateway changed in what the upstream sent: a dropped choice, a renumbered
    tool call (``{kind, choice, upstream_index, index}``)."""
    omitted_tools: list[str] = []
    """The kinds of tool the request offered that no upstream was sent (hosted tools)."""
    stored_response: str | None = None
    """The stored response this request answered with (``GET /v1/responses/{id}``)."""
    cache: str | None = None
    """A model with a ``cache``: ``hit``, ``miss`` or ``bypass`` (docs/cache.md)."""
    cache_filled_by: str | None = None
    """A hit: the request whose answer it served."""
    cache_similarity: float | None = None
    """A semantic hit: the cosine similarity of its last user turn to the kept one's."""
    cache_embedding_ms: float | None = None
    """The semantic cache's embedding of the last user turn: how long it took."""
    coalesced: int = 0
    """A refusal before any upstream call: how many more refusals of the same key, status
    and code this row stands for (answered in its window without rows of their own)."""


KeyChange = Callable[[str | None, KeyPolicy], tuple[str | None, KeyPolicy]]
"""What a change makes of a key's label and policy as they are stored now."""
AccountChange = Callable[[AccountPolicy], AccountPolicy]

KeyPosition = tuple[int, str]
"""Where a key listing stopped: the last key's ``(created_at, id)``."""


class Store(TenantStore, ResponseStore, ReserveStore, Protocol):
    """Everything the gateway keeps; the roles apart are :class:`~.tenants.TenantStore`,
    :class:`~.responses.ResponseStore` and :class:`~.reserves.ReserveStore`."""

    async def migrate(self) -> None: ...

    async def close(self) -> None: ...

    # -- accounts and keys -------------------------------------------------------------

    async def find_principal(self, key_digest: str) -> Principal | None:
        """The live (not revoked) key with this digest and its account."""
        ...

    async def ensure_account(
        self, account_id: str, name: str, *, metered: bool, is_dev: bool, now: int
    ) -> str:
        """Create the account unless one with ``name`` exists; returns its id."""
        ...

    async def create_account(
        self,
        account_id: str,
        name: str,
        *,
        metered: bool,
        credits: int,
        now: int,
        policy: AccountPolicy = NO_ACCOUNT_POLICY,
    ) -> Account:
        """A new account; its starting credits are its first ledger entry.
        Raises :class:`~sluice.errors.ConflictError` when the name is taken."""
        ...

    async def get_account(self, name: str) -> Account | None: ...

    async def change_account(self, account_id: str, change: AccountChange) -> AccountPolicy | None:
        """Apply ``change`` to the account's policy as stored now and store the result, in
        one transaction, so concurrent changes each build on the one before (none is
        lost); it takes effect on its keys' next requests. None: no such account."""
        ...

    async def add_credits(self, name: str, amount: int, *, now: int, note: str) -> Account:
        """Credit (or, negative, debit) an account through a ledger entry."""
        ...

    async def add_key(
        self,
        key_id: str,
        *,
        account_id: str,
        key_digest: str,
        prefix: str,
        name: str | None,
        now: int,
        policy: KeyPolicy = NO_POLICY,
    ) -> None: ...

    async def list_keys(
        self, account_id: str, limit: int | None = None, after: KeyPosition | None = None
    ) -> list[KeyInfo]:
        """The account's keys, oldest first by ``(created_at, id)``: up to ``limit`` (all
        when None) after position ``after`` (from the first when None)."""
        ...

    async def find_key(self, prefix: str) -> KeyInfo | None:
        """The live key whose readable prefix starts with ``prefix``; None when there is
        none. Raises :class:`~sluice.errors.ConflictError` when several match."""
        ...

    async def change_key(
        self, key_id: str, change: KeyChange
    ) -> tuple[str | None, KeyPolicy] | None:
        """Apply ``change`` to the key's label and policy as stored now and store the
        result, in one transaction (see :meth:`change_account`); None: no such key."""
        ...

    async def rotate_key(self, key_id: str, *, key_digest: str, prefix: str, was: str) -> bool:
        """A new secret for the same key record (the old one stops working), if the key
        is live and its prefix still ``was``: one conditional update, so it serializes
        with :meth:`revoke_keys`. False when a rotation or revocation came first (its
        secret stands, or the key stays revoked; this one is not stored)."""
        ...

    async def key_spent(self, key_id: str, since: int) -> int:
        """Nano-USD charged to requests made with the key since ``since``."""
        ...

    async def revoke_keys(self, which: KeySelector, now: int) -> list[KeyInfo]:
        """Revoke the live keys ``which`` names, in one conditional update; the keys it
        revoked (none: nothing live matched). Against a concurrent :meth:`rotate_key`
        either order holds: revoked first, the rotation is refused; rotated first, the
        old prefix and digest name nothing (the id still names the key)."""
        ...

    # -- holds and the ledger ----------------------------------------------------------

    async def place_hold(self, hold: HoldRequest) -> bool:
        """Hold ``amount`` if the account's available balance covers it (atomic);
        False when it does not. With a ``key_budget``, first (in the same transaction,
        serialized per key) the key's charges since its period began plus its open
        holds plus ``amount`` must fit the budget, else :class:`KeyBudgetExceededError`;
        with an ``account_budget``, then (serialized per account) the same for the
        account, else :class:`AccountBudgetExceededError`."""
        ...

    async def settle(self, settlements: list[Settlement]) -> None:
        """Charge and release: one ledger entry per settlement, in one transaction.
        Raises :class:`ConstraintViolationError` (and writes nothing) when one of them would
        break an invariant."""
        ...

    async def reclaim_expired(self, now: int) -> int:
        """Release holds whose expiry passed (a crashed process's); returns how many."""
        ...

    async def reconcile(self) -> list[Mismatch]: ...

    async def open_holds(self) -> tuple[int, int]:
        """How many holds are open over every account, and the nano-USD they hold (for
        metrics: one scan of the open-holds partial index, which holds only open rows)."""
        ...

    # -- request log -------------------------------------------------------------------

    async def write_requests(self, records: list[RequestRecord]) -> None: ...

    async def get_request(self, request_id: str, account_id: str) -> RequestRecord | None:
        """The row, only if it belongs to ``account_id`` (one query, ownership included)."""
        ...

    async def list_requests(
        self, filters: RequestFilters, limit: int, after: RequestPosition | None
    ) -> list[RequestRecord]:
        """Up to ``limit`` rows that pass ``filters``, newest first by ``(created_at, id)``,
        those before position ``after`` (from the newest when None), however many pages
        of :meth:`request_page` that takes (the operator's CLI)."""
        ...

    async def request_page(
        self,
        filters: RequestFilters,
        limit: int,
        after: RequestPosition | None,
        examine: int = MAX_EXAMINED,
    ) -> tuple[list[RequestRecord], RequestPosition | None]:
        """As :meth:`list_requests`, reading at most ``examine`` rows (at least
        ``limit + 1``) of the index its filters lead to; and where the next page starts:
        the last row returned when more passed, the last row read when the bound was
        reached first, None when no row is left (:mod:`~sluice.storage.request_query`)."""
        ...

    async def request_log_cutoff(self, keep: int) -> RequestPosition | None:
        """The position of the ``keep``-th newest row; None when there are fewer."""
        ...

    async def prune_requests(self, before: RequestPosition, limit: int) -> int:
        """Delete up to ``limit`` of the oldest rows before position ``before`` (one
        short transaction); how many. The ledger is never pruned."""
        ...

    async def spend(
        self, filters: SpendFilters, by: SpendBy, limit: int, after: SpendAfter | None
    ) -> tuple[list[SpendGroup], SpendTotal]:
        """Up to ``limit`` groups of the ledger's charges (:mod:`~sluice.storage.spend`)
        after ``after``, and the total of every charge the filters keep."""
        ...

    # -- the control plane -------------------------------------------------------------

    async def schema_version(self) -> int:
        """The newest migration applied; 0 for a database Sluice never migrated."""
        ...

    async def list_accounts(self, limit: int, after: str | None) -> list[Account]:
        """Up to ``limit`` accounts in account-id order, those after id ``after`` (all
        from the first when None): a stable order a cursor can resume."""
        ...


def balance_limit_error() -> InvalidRequestError:
    """A credit or debit that would leave a balance past what one may hold."""
    return InvalidRequestError(
        f"A balance stays within ${MAX_AMOUNT_USD:,} either way; this amount would pass it.",
        code="balance_out_of_range",
        param="amount",
    )
