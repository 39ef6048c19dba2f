"""What an endpoint may use of the gateway, as a protocol: endpoints depend on this, not
on :mod:`.app`, which registers them (so the dependency goes one way; the layering
tests check that only the composition root and the lifecycle import :mod:`.app`).
:class:`~.app.Gateway` satisfies it. State only one endpoint keeps (the live feeds, the
token-count cache) is bound to that endpoint in the route table, not kept here."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, TypeVar

from sluice.accounts.vault import Vault
from sluice.exchange.services import Services
from sluice.exchange.tenants import Tenants
from sluice.frontdoors.responses.memory import ResponseMemory
from sluice.ids import IdFactory
from sluice.routing.catalog import Catalog
from sluice.server.auth import Authenticator
from sluice.server.generation import Reloaded
from sluice.settings import Settings
from sluice.storage.base import Store
from sluice.storage.writer import WriteBehind

_T = TypeVar("_T")


class GatewayContext(Protocol):
    """The parts the process holds for its lifetime (``store``, ``auth``, ``memory``,
    clocks) and the current config's (``settings``, ``services``, ``catalog``,
    ``tenants``, ``models_body``: read once per request, a reload swaps them)."""

    @property
    def store(self) -> Store: ...

    @property
    def vault(self) -> Vault | None: ...

    @property
    def auth(self) -> Authenticator: ...

    @property
    def memory(self) -> ResponseMemory: ...

    @property
    def new_id(self) -> IdFactory: ...

    @property
    def clock(self) -> Callable[[], float]: ...

    @property
    def wall_clock(self) -> Callable[[], float]: ...

    @property
    def settings(self) -> Settings: ...

    @property
    def services(self) -> Services: ...

    @property
    def catalog(self) -> Catalog: ...

    @property
    def tenants(self) -> Tenants: ...

    @property
    def models_body(self) -> bytes: ...

    @property
    def writer(self) -> WriteBehind: ...

    def reload(self) -> Reloaded: ...

    async def decoded(self, decode: Callable[[], _T], body: bytes | bytearray) -> _T: ...

    async def check_upstream_url(self, url: str) -> None: ...
