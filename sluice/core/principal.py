"""The caller of a request, as authentication found it."""

from __future__ import annotations

import msgspec


class Principal(msgspec.Struct, frozen=True):
    """Who is calling: the account and the key it used."""

    account_id: str
    account_name: str
    key_id: str
    key_prefix: str
    metered: bool
    is_dev: bool
