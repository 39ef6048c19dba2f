"""What the gateway needs from storage, whatever the backend (SQLite now, PostgreSQL too).

Every query is parameterized; no value from a request is ever formatted into SQL.
"""

from __future__ import annotations

from typing import Protocol

import msgspec


class Principal(msgspec.Struct, frozen=True):
    """Who is calling: the account and the key it used."""

    account_id: str
    account_name: str
    key_id: str
    key_prefix: str
    metered: bool
    is_dev: bool


class Store(Protocol):
    async def migrate(self) -> None: ...

    async def close(self) -> None: ...

    async def find_principal(self, key_digest: str) -> Principal | None:
        """The live (not revoked) key with this digest and its account."""
        ...

    async def ensure_account(
        self, account_id: str, name: str, *, metered: bool, is_dev: bool, now: int
    ) -> str:
        """Create the account unless one with ``name`` exists; returns its id."""
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
    ) -> None: ...
