"""A resolved connection and one attempt's target: what routing plans with, what an
adapter builds a request for, and what the transport sends it over."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

import msgspec

from sluice.core.usage import Price


class Secret:
    """A credential. Its text is only reachable through :meth:`reveal`."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)


class Timeouts(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Seconds. ``stall``: longest silence between upstream events; ``total``: longest
    an upstream call may take, from sending the request to the last byte (a stream
    that trickles a byte now and then still ends)."""

    connect: Annotated[float, msgspec.Meta(gt=0)] = 10.0
    """To open a connection (TLS included)."""
    first_event: Annotated[float, msgspec.Meta(gt=0)] = 60.0
    """From sending the request to the first event a client must see (failover is
    possible until then)."""
    stall: Annotated[float, msgspec.Meta(gt=0)] = 120.0
    """The longest silence between upstream events."""
    total: Annotated[float, msgspec.Meta(gt=0)] = 600.0
    """The whole call, from sending the request to the last byte."""


class ConnectionSettings(msgspec.Struct, frozen=True):
    """A resolved connection: credentials read, base URL defaulted."""

    id: str
    provider: str
    base_url: str
    api_key: Secret | None = None
    region: str | None = None
    timeouts: Timeouts = Timeouts()
    on_disconnect: str = "cancel"
    weight: float = 1.0
    prices: Mapping[str, Price] = msgspec.field(default_factory=dict)
    models: Mapping[str, str] | None = None
    """An account's own connection: exactly these models (ours -> native), nothing else."""
    owner: str | None = None
    """The account that owns this connection (its upstream address is guarded)."""
    options: Mapping[str, Any] = msgspec.field(default_factory=dict)
    passthrough: bool = False
    """Serves ``<id or provider>/<any upstream name>`` without a catalog entry."""
    allow_extra_fields: frozenset[str] = frozenset()
    """Request fields outside the chat wire forwarded to this upstream as sent."""
    allow_unpriced: bool = False
    """Credit-metered accounts may use its unpriced models (for free)."""


class Target(msgspec.Struct, frozen=True):
    """One upstream attempt: a catalog model served over one connection."""

    model_id: str
    native_model: str
    connection: ConnectionSettings
